//! Runtime wiring of a play: the palette router, the agent registry and
//! what agent CLIs need from the run. The play module only reads and checks
//! TOML; turning a play into live components happens here.

use std::sync::Arc;

use crate::agents::{AgentRegistry, ProfileOverlay, RunContext, Tails};
use crate::palette::{PaletteRouter, RunProvisioner};
use crate::play::Play;

/// The palette router for a run of this play; role artifact directories
/// go under `run_dir` (none for previews).
pub fn palette_router(
    play: &Play,
    run_dir: Option<&std::path::Path>,
    speed: f64,
) -> Arc<PaletteRouter> {
    let provisioner = RunProvisioner {
        run_dir: run_dir.map(|p| p.to_path_buf()),
        simulate: play.palette.simulate.clone(),
        speed,
        setups: Arc::new(play.role_setups()),
    };
    PaletteRouter::new(Arc::new(play.palette.clone()), Arc::new(provisioner))
}

/// A router for previews (`playdeck palette`, `prompt`): resolved as a run
/// would be, with no run directory and no simulated delay or failure.
pub fn preview_router(play: &Play) -> Arc<PaletteRouter> {
    let provisioner = RunProvisioner {
        run_dir: None,
        simulate: Default::default(),
        speed: 1.0,
        setups: Arc::new(play.role_setups()),
    };
    PaletteRouter::new(Arc::new(play.palette.clone()), Arc::new(provisioner))
}

/// What the agent registry of a run of this play needs: the log
/// directory, the play's flag profile, role profile overlays.
pub fn run_context(
    play: &Play,
    run_id: &str,
    log_dir: Option<std::path::PathBuf>,
    tails: Arc<Tails>,
) -> RunContext {
    let profiles = play
        .capacity
        .iter()
        .flat_map(|c| c.profiles.values())
        .map(|p| {
            (
                p.name.clone(),
                ProfileOverlay {
                    model: p.model.clone(),
                    thinking: p.thinking,
                    startup_args: p.startup_args.clone(),
                    flag_profile: p.provider_profile.clone(),
                    tools: p.tools.clone(),
                },
            )
        })
        .collect();
    let run_dir = log_dir
        .as_deref()
        .and_then(std::path::Path::parent)
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()));
    RunContext {
        run_id: run_id.to_string(),
        run_dir,
        log_dir,
        workspace: play.dir.clone(),
        flag_profile: play.flag_profile.clone(),
        profiles,
        tails,
        speed: play.speed,
        prices: play.prices.clone(),
    }
}

/// The agents of a run: the built-ins and this play's agent CLIs.
pub fn agent_registry(play: &Play, speed: f64, mut ctx: RunContext) -> AgentRegistry {
    ctx.speed = speed;
    AgentRegistry::with_commands(speed, play.agents.values(), Arc::new(ctx))
}
