//! Commands that read a play and print: validate, catalog, palette,
//! prompt, argv, demo.

use std::path::Path;

use super::{CmdError, Outcome, block_on, load};
use playdeck::inspect;
use playdeck::play::{Play, demo};

pub fn validate(play: &Path, explain: bool) -> Outcome {
    let p = load(Some(play))?;
    sayln!("{}", p.summary());
    if explain {
        let placements = p.placements();
        let w = placements.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
        for (id, how) in placements {
            sayln!("  {id:<w$}  {how}");
        }
    } else if let Some(note) = p.sequential_note() {
        sayln!("note: {note}");
    }
    Ok(0)
}

pub fn catalog(json: bool) -> Outcome {
    if json {
        sayln!("{:#}", inspect::catalog_json());
    } else {
        say!("{}", inspect::catalog_text());
    }
    Ok(0)
}

pub fn palette(play: Option<&Path>, json: bool) -> Outcome {
    let p = load(play)?;
    let text = block_on(false, async {
        if json {
            inspect::palette_json(&p).await.map(|v| format!("{v:#}\n"))
        } else {
            inspect::palette_text(&p).await
        }
    })?
    .map_err(|e| CmdError::Input(e.to_string()))?;
    say!("{text}");
    Ok(0)
}

pub fn prompt(play: Option<&Path>, op: &str) -> Outcome {
    let p = load(play)?;
    let text =
        block_on(false, inspect::prompt(&p, op))?.map_err(|e| CmdError::Input(e.to_string()))?;
    sayln!("{text}");
    Ok(0)
}

pub fn argv(play: Option<&Path>, op: &str, flag_profile: Option<&str>, json: bool) -> Outcome {
    let p: Play = load(play)?;
    let view = block_on(false, inspect::argv(&p, op, flag_profile))?
        .map_err(|e| CmdError::Input(e.to_string()))?;
    for w in &view.command.warnings {
        warnln!("playdeck: warning: {w}");
    }
    if let Some(text) = &view.command.stdin {
        warnln!(
            "playdeck: the prompt ({} bytes) goes on stdin, in place of \"-\"",
            text.len()
        );
    }
    if json {
        sayln!("{}", serde_json::Value::from(view.command.argv.clone()));
    } else {
        let words = view.command.argv.iter().map(String::as_str);
        sayln!(
            "{}",
            shlex::try_join(words).map_err(|e| CmdError::Failed(e.to_string()))?
        );
    }
    Ok(0)
}

pub fn demo(print: bool) -> Outcome {
    if print {
        say!("{}", demo::DEMO_PLAY);
    } else {
        sayln!("the demo play: `playdeck demo --print` shows it, `playdeck run` runs it");
    }
    Ok(0)
}
