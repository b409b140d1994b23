//! One run's set-up, shared by every surface (headless, console,
//! screenshots): the run directory, the graph, the palette router, the
//! capacity reconciler, the control socket, palette preparation. A surface
//! adds its sinks or subscribes, then starts the run.

use std::path::PathBuf;
use std::sync::Arc;

use crate::agents::Tails;
use crate::capacity::Reconciler;
use crate::control::ControlServer;
use crate::kernel::{ApprovalPolicy, NodeBuilder, Run, RunHandle, SignalSink};
use crate::palette::PaletteRouter;
use crate::play::Play;
use crate::store::RunDir;

#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Overrides `[play] speed`.
    pub speed: Option<f64>,
    pub paused: bool,
    pub approvals: ApprovalPolicy,
    pub run_dir: Option<PathBuf>,
    /// A fixed run id (screenshots); otherwise the directory's name.
    pub run_id: Option<String>,
    /// Listen on the control socket.
    pub control: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            speed: None,
            paused: false,
            approvals: ApprovalPolicy::Ask,
            run_dir: None,
            run_id: None,
            control: true,
        }
    }
}

pub struct Session {
    run: Option<Run>,
    pub handle: RunHandle,
    pub run_dir: RunDir,
    pub router: Arc<PaletteRouter>,
    pub reconciler: Option<Arc<Reconciler>>,
    pub control: Option<ControlServer>,
    /// Set when the control socket could not be opened (the run goes on).
    pub control_error: Option<String>,
    pub speed: f64,
    /// The last lines of each agent CLI's output.
    pub tails: Arc<Tails>,
}

impl Session {
    /// Prepares a run of `play`; `sinks` see every signal from the first.
    pub async fn open(
        play: &Play,
        opts: &SessionOptions,
        sinks: Vec<Box<dyn SignalSink>>,
    ) -> std::io::Result<Session> {
        let speed = opts.speed.unwrap_or(play.speed);
        let mut run_dir = RunDir::create(opts.run_dir.as_deref(), &play.source)?;
        if let Some(id) = &opts.run_id {
            run_dir.run_id = id.clone();
        }
        let built = play.build();
        let mut cfg = play.run_config(&run_dir.run_id);
        cfg.start_paused = opts.paused;
        cfg.approvals = opts.approvals.clone();
        // Observers that fall behind resynchronise; a roomy buffer makes
        // that rare.
        cfg.signal_buffer = 1 << 16;
        let tails = crate::agents::Tails::new();
        let ctx = play.run_context(
            &run_dir.run_id,
            Some(run_dir.path.join("logs")),
            tails.clone(),
        );
        let agents = Arc::new(play.agent_registry(speed, ctx));
        let router = play.palette_router(Some(&run_dir.path), speed);
        let builder: Arc<dyn NodeBuilder> = Arc::new(router.clone());
        let op_roles = play.op_roles(&built);
        let (mut run, handle) =
            Run::new(built.graph, cfg, agents, builder).map_err(std::io::Error::other)?;
        run.add_sink(Box::new(run_dir.event_log()?));
        for s in sinks {
            run.add_sink(s);
        }
        let reconciler =
            play.capacity.as_ref().filter(|c| c.enabled).map(|c| {
                Reconciler::new(Arc::new(c.clone()), &run_dir.run_id, run_dir.path.clone())
            });
        if let Some(r) = &reconciler {
            r.attach(run.external());
            run.set_leases(r.clone());
        }
        let (control, control_error) = if opts.control {
            match ControlServer::start(&run_dir.path, handle.clone(), reconciler.clone()) {
                Ok(c) => (Some(c), None),
                Err(e) => (None, Some(format!("no control socket for this run: {e}"))),
            }
        } else {
            (None, None)
        };
        crate::palette::prepare(&router, &op_roles, &mut run)
            .await
            .map_err(std::io::Error::other)?;
        Ok(Session {
            run: Some(run),
            handle,
            run_dir,
            router,
            reconciler,
            control,
            control_error,
            speed,
            tails,
        })
    }

    /// Takes the prepared run to start it (once).
    pub fn take_run(&mut self) -> Option<Run> {
        self.run.take()
    }

    /// After the run: waits for capacity state to reach the disk.
    pub async fn close(&self) {
        if let Some(r) = &self.reconciler {
            r.close().await;
        }
    }
}
