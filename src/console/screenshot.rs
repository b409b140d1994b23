//! `playdeck screenshot`: the console at a virtual moment of a run, to SVG.
//! The run plays under tokio's paused clock with sequential op ids and a
//! fixed run id, and only built-in themes and keys are used, so the same
//! input gives the same bytes.

use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::{KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

use super::app::{App, Effect};
use super::keymap::Keymap;
use super::run::{command, facts, hooks};
use super::theme;
use crate::kernel::{Observed, Request};
use crate::play::Play;
use crate::session::{Session, SessionOptions};

pub struct ShotOptions {
    pub at: f64,
    pub width: u16,
    pub height: u16,
    pub theme: Option<String>,
    /// Keys pressed at that moment, in order (`p`, `i`, `enter`, `down`);
    /// `+N` lets N seconds of run time pass.
    pub keys: Vec<String>,
    pub out: PathBuf,
    /// Where the runs screen (`L`) looks, instead of `.playdeck/runs`.
    pub runs_dir: Option<PathBuf>,
}

/// A `--keys` word that is neither a key nor `+N` seconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    #[error("{0:?}: +N lets N seconds pass; N must be a number of seconds")]
    NotSeconds(String),
    #[error(transparent)]
    Key(#[from] super::keymap::KeyError),
}

/// Parses `--keys "p +2 s"`: keys, and `+N` for N seconds passing.
pub fn parse_keys(s: &str) -> Result<Vec<String>, KeysError> {
    let keys: Vec<String> = s.split_whitespace().map(str::to_string).collect();
    for k in &keys {
        if let Some(n) = k.strip_prefix('+') {
            match n.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => continue,
                _ => return Err(KeysError::NotSeconds(k.clone())),
            }
        }
        super::keymap::KeyCombo::parse(k)?;
    }
    Ok(keys)
}

fn key_event(k: &str) -> KeyEvent {
    let combo = super::keymap::KeyCombo::parse(k).expect("checked by parse_keys");
    let mods = if combo.ctrl {
        KeyModifiers::CONTROL
    } else {
        KeyModifiers::NONE
    };
    KeyEvent::new(combo.code, mods)
}

/// Lets every task due now run, without moving the paused clock.
async fn settle() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}

/// A run played to a moment under the paused clock, with the console's
/// state folded from it. Screenshots and snapshot tests are built on it.
pub struct Scene {
    pub app: App,
    pub session: Session,
    sub: crate::kernel::Subscription,
    task: tokio::task::JoinHandle<crate::kernel::Envelope>,
    area: ratatui::layout::Rect,
    at: f64,
    /// What `O` and `D` asked to page (a scene has no terminal to lend).
    pub pages: Vec<super::app::Page>,
    _dir: tempfile::TempDir,
}

impl Scene {
    /// Plays `play` to `at` seconds (virtual) on a `width`×`height` screen.
    /// Must run on a runtime with a paused clock.
    pub async fn at(
        play: &Play,
        at: f64,
        width: u16,
        height: u16,
        theme_name: Option<&str>,
    ) -> std::io::Result<Scene> {
        let dir = tempfile::tempdir()?;
        let opts = SessionOptions {
            run_dir: Some(dir.path().join("run")),
            run_id: Some("demo".into()),
            control: false,
            ..SessionOptions::default()
        };
        Scene::with(play, opts, dir, at, width, height, theme_name).await
    }

    /// Like [`Scene::at`], for a session opened with `opts` (a resume, a
    /// retry); `dir` is kept as long as the scene.
    pub async fn with(
        play: &Play,
        opts: SessionOptions,
        dir: tempfile::TempDir,
        at: f64,
        width: u16,
        height: u16,
        theme_name: Option<&str>,
    ) -> std::io::Result<Scene> {
        let mut session = Session::open(play, &opts, Vec::new()).await?;
        let sub = session.handle.subscribe();
        let history = std::mem::take(&mut session.history);
        let run = session.take_run().expect("a fresh session");
        let task = tokio::spawn(run.run());
        tokio::time::sleep(Duration::from_secs_f64(at)).await;
        settle().await;
        let themes = theme::load_all(None).map_err(std::io::Error::other)?;
        let t = match theme_name {
            None => 0,
            Some(n) => themes.iter().position(|t| t.name == n).ok_or_else(|| {
                std::io::Error::other(format!(
                    "no built-in theme {n:?}; themes: {}",
                    theme::builtin_names().join(", ")
                ))
            })?,
        };
        let mut app = App::new(
            &facts(play),
            themes,
            t,
            Keymap::defaults(),
            false,
            hooks(&session),
        );
        // A resumed run shows what happened before, as the console does.
        for s in &history {
            app.fold(s);
        }
        let mut scene = Scene {
            app,
            session,
            sub,
            task,
            area: ratatui::layout::Rect::new(0, 0, width, height),
            at,
            pages: Vec::new(),
            _dir: dir,
        };
        scene.refresh();
        Ok(scene)
    }

    /// Folds what the run said and lays the screen out again.
    fn refresh(&mut self) {
        while let Some(Observed::Signal(s)) = self.sub.try_next() {
            self.app.fold(&s);
        }
        self.app.after_fold();
        self.app.clock = self.at;
        super::ui::arrange(&mut self.app, self.area);
    }

    /// Changes the screen's size (as a terminal resize would).
    pub fn resize(&mut self, width: u16, height: u16) {
        self.area = ratatui::layout::Rect::new(0, 0, width, height);
        super::ui::arrange(&mut self.app, self.area);
    }

    /// Presses keys at this moment, carrying out their effects; `+N` lets
    /// N seconds of run time pass.
    pub async fn press(&mut self, keys: &[String]) {
        for k in keys {
            if let Some(secs) = k.strip_prefix('+').and_then(|n| n.parse::<f64>().ok()) {
                self.wait(secs).await;
                continue;
            }
            self.key(key_event(k)).await;
        }
    }

    /// Presses one key, carrying out its effects as the event loop would.
    pub async fn key(&mut self, e: KeyEvent) {
        let effects = self.app.on_key(e);
        for e in effects {
            match e {
                Effect::Control(req) => {
                    let capacity = self.session.reconciler.as_deref();
                    let answer = command(&self.session.handle, capacity, req.clone()).await;
                    settle().await;
                    self.refresh();
                    self.app.answered(req, answer);
                }
                Effect::Controls(reqs) => {
                    let capacity = self.session.reconciler.as_deref();
                    let (text, level) =
                        super::run::commands(&self.session.handle, capacity, reqs).await;
                    self.app.set_status(text, level);
                }
                Effect::Report => super::run::write_report(&mut self.app),
                Effect::ListRuns => {
                    let dir = super::run::runs_dir(&self.app);
                    let rows = crate::control::listing::list(&dir).unwrap_or_default();
                    self.app.open_runs(rows);
                }
                // No terminal to lend: kept for tests to read.
                Effect::Page(p) => self.pages.push(p),
                Effect::Notify(_) | Effect::PreviewRelease | Effect::Replay(_) => {}
            }
        }
        settle().await;
        self.refresh();
    }

    /// Lets `secs` of run time pass.
    pub async fn wait(&mut self, secs: f64) {
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        settle().await;
        self.at += secs;
        self.refresh();
    }

    /// The run's signals so far, from its log.
    pub fn log(&self) -> Vec<crate::kernel::Signal> {
        crate::store::resume::read_log(&self.session.run_dir.events_path()).unwrap_or_default()
    }

    /// Renders the whole console (laid out for its size first, as a frame
    /// is).
    pub fn render(&mut self) -> Buffer {
        super::ui::arrange(&mut self.app, self.area);
        let Ok(mut term) = Terminal::new(TestBackend::new(self.area.width, self.area.height));
        let Ok(_) = term.draw(|f| super::ui::draw(f, &self.app));
        // As a frame does: what it showed selected is what the operator saw.
        self.app.pick();
        term.backend().buffer().clone()
    }

    /// Ends the run and cleans up.
    pub async fn finish(self) {
        let _ = self.session.handle.request(Request::Cancel).await;
        let _ = self.task.await;
        self.session.close().await;
    }
}

/// Plays `play` to `at` seconds and renders the console to a buffer.
pub async fn render_at(
    play: &Play,
    at: f64,
    width: u16,
    height: u16,
    theme_name: Option<&str>,
    keys: &[String],
    runs_dir: Option<PathBuf>,
) -> std::io::Result<(Buffer, theme::Theme)> {
    let mut scene = Scene::at(play, at, width, height, theme_name).await?;
    scene.app.hooks.runs_dir = runs_dir;
    scene.press(keys).await;
    let buffer = scene.render();
    let theme = scene.app.theme().clone();
    scene.finish().await;
    Ok((buffer, theme))
}

/// The whole command: renders and writes the SVG.
#[cfg(feature = "screenshot")]
pub fn screenshot(play: &Play, opts: &ShotOptions) -> std::io::Result<()> {
    // Screenshots play the run in virtual time; an agent CLI is a real
    // process in real time, and its stall and runtime limits would fire at
    // once.
    let real: Vec<&str> = play
        .operations
        .iter()
        .filter(|o| play.agents.contains_key(play.runs_on(o)))
        .map(|o| o.id.as_str())
        .collect();
    if !real.is_empty() {
        return Err(std::io::Error::other(format!(
            "screenshots play a run in virtual time, but {} run on agent CLIs, which run in real time; screenshot a play whose operations run on sim",
            real.join(", ")
        )));
    }
    crate::kernel::graph::use_sequential_ids();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()?;
    let (buffer, theme) = rt.block_on(render_at(
        play,
        opts.at,
        opts.width,
        opts.height,
        opts.theme.as_deref(),
        &opts.keys,
        opts.runs_dir.clone(),
    ))?;
    let svg = super::svg::render(&buffer, &theme);
    crate::files::write_atomic(&opts.out, svg.as_bytes())
}

/// A `--size` that is not WIDTHxHEIGHT within bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a size; write WIDTHxHEIGHT, for example 160x48 (at least 80x24)")]
pub struct NotASize(pub String);

/// `160x48`.
pub fn parse_size(s: &str) -> Result<(u16, u16), NotASize> {
    let bad = || NotASize(s.to_string());
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    let (w, h): (u16, u16) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if w < 20 || h < 10 || w > 500 || h > 200 {
        return Err(bad());
    }
    Ok((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_keys_parse() {
        assert_eq!(parse_size("160x48"), Ok((160, 48)));
        assert!(parse_size("160").is_err());
        assert!(parse_size("5x5").is_err());
        assert_eq!(parse_keys("p  i enter").unwrap(), ["p", "i", "enter"]);
        assert!(parse_keys("p bogus-key").is_err());
        assert_eq!(parse_keys("p +2 s").unwrap(), ["p", "+2", "s"]);
        assert!(parse_keys("+x").is_err());
    }

    #[test]
    fn refusals_name_the_value_and_how_to_write_it() {
        assert_eq!(
            parse_size("160").unwrap_err().to_string(),
            r#""160" is not a size; write WIDTHxHEIGHT, for example 160x48 (at least 80x24)"#
        );
        assert_eq!(
            parse_keys("p +soon").unwrap_err().to_string(),
            r#""+soon": +N lets N seconds pass; N must be a number of seconds"#
        );
        assert!(
            parse_keys("hyper-p")
                .unwrap_err()
                .to_string()
                .starts_with(r#""hyper-p" is not a key; write a character"#)
        );
    }
}
