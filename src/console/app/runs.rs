//! The runs screen: this machine's runs, this one's row from what the
//! console shows now, and going on to another.

use super::*;

impl App {
    /// The runs screen, with the rows read: this run's own row is taken
    /// from what the console shows now (it is the freshest).
    pub fn open_runs(&mut self, mut rows: Vec<crate::control::listing::RunRow>) {
        let here = self.hooks.run_dir.clone();
        let vm = &self.vm;
        // This run, even when its directory is elsewhere.
        if let Some(d) = &here
            && !rows.iter().any(|r| same_dir(d, &r.dir))
        {
            let id = vm.run.run_id.to_string();
            rows.insert(
                0,
                crate::control::listing::RunRow {
                    started: crate::control::listing::started_of_id(&id).unwrap_or(0),
                    id,
                    dir: d.clone(),
                    play: vm.run.play.to_string(),
                    state: String::new(),
                    live: true,
                    elapsed: 0.0,
                    done: None,
                    total: 0,
                    awaiting_approval: Vec::new(),
                    spent: None,
                    workers: None,
                },
            );
        }
        for r in &mut rows {
            if here.as_ref().is_some_and(|d| same_dir(d, &r.dir)) && vm.run.finished.is_none() {
                let waiting = vm.approvals_waiting();
                r.live = true;
                r.elapsed = self.clock;
                r.total = vm.counts.total();
                r.done = Some(vm.counts.settled());
                r.spent = Some((vm.spend.usd, vm.spend.tokens));
                r.state = if waiting > 0 {
                    format!("needs approval ×{waiting}")
                } else if vm.run.paused {
                    "paused".into()
                } else {
                    "running".into()
                };
                let ws = vm.capacity.workers.as_ref().map(|(ws, _)| &ws[..]);
                r.state = crate::control::listing::with_workers(std::mem::take(&mut r.state), ws);
                r.workers = ws.map(<[_]>::to_vec);
            }
        }
        // Row 0 is the columns' titles; runs are 1…
        let mut scroll = ScrollList::list();
        scroll.set_len(rows.len() + 1);
        let at = rows
            .iter()
            .position(|r| here.as_ref().is_some_and(|d| same_dir(d, &r.dir)))
            .unwrap_or(0);
        scroll.select(at + 1);
        self.overlays.push(Overlay::Runs { rows, scroll });
    }

    /// `enter` on the runs screen.
    pub fn pick_run(&mut self) {
        let Some(Overlay::Runs { rows, scroll }) = self.overlays.last() else {
            return;
        };
        let Some(r) = scroll
            .selected()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| rows.get(i))
            .cloned()
        else {
            return;
        };
        let here = self
            .hooks
            .run_dir
            .as_ref()
            .is_some_and(|d| same_dir(d, &r.dir));
        if here {
            self.overlays.pop();
            self.info(format!("run {} is the one shown", r.id));
        } else if !r.live && (!self.hooks.attached || self.hooks.run_dir.is_none()) {
            self.info(format!(
                "run {} is {}: `playdeck replay {}` shows it",
                r.id,
                r.state,
                r.dir.display()
            ));
        } else if !self.hooks.attached || self.hooks.run_dir.is_none() {
            self.info(format!(
                "this console holds its own run; from another terminal: playdeck attach {}",
                r.dir.display()
            ));
        } else {
            // A live one is attached to; a finished one opens in its
            // replay (the console that leaves for it sees to that).
            self.switch_to = Some(r.dir.clone());
            self.should_exit = true;
        }
    }
}

pub fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || std::fs::canonicalize(a)
            .ok()
            .zip(std::fs::canonicalize(b).ok())
            .is_some_and(|(x, y)| x == y)
}
