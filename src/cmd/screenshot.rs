//! `playdeck screenshot`: the console at a moment of a run, as SVG.

use super::{CmdError, Outcome, load};
use crate::cli::ScreenshotArgs;
use playdeck::console::screenshot::{ShotOptions, parse_keys, screenshot as shoot};

pub fn screenshot(a: ScreenshotArgs) -> Outcome {
    let keys = parse_keys(&a.keys).map_err(|e| CmdError::Input(format!("--keys: {e}")))?;
    if !(a.at.is_finite() && a.at >= 0.0) {
        return Err(CmdError::Input(format!(
            "--at {} is not a moment; allowed: seconds from 0",
            a.at
        )));
    }
    let play = load(a.play.as_deref())?;
    let opts = ShotOptions {
        at: a.at,
        width: a.size.0,
        height: a.size.1,
        theme: a.theme,
        keys,
        out: a.out,
        runs_dir: a.runs_dir,
    };
    shoot(&play, &opts).map_err(|e| CmdError::Input(format!("screenshot: {e}")))?;
    Ok(0)
}
