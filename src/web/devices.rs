//! Who may use the page: paired devices and the one-time codes that pair
//! them, kept in the user's state directory (`…/playdeck/web/`, 0700).
//!
//! A device is a random token its browser holds in a cookie (a script, in
//! a bearer header); the server keeps only the token's SHA-256, so an
//! agent that reads the user's files learns no token it could present.
//! A pairing code is a file named by the code's SHA-256 and holding what
//! it grants and until when; consuming it renames it away first, so of
//! two who present one code, one wins. `playdeck web pair` (another
//! process) writes codes; the server reads the devices file at each
//! request, so a `web revoke` holds at once.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How long a pairing code is good for.
pub const PAIRING_SECS: u64 = 120;

/// What a device may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Sees runs; changes nothing.
    Watch,
    /// Also answers gates, questions, reviews, retries and says.
    Decide,
    /// Also cancels, pauses, resumes, steps, raises caps and adds work.
    Steer,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Watch => "watch",
            Scope::Decide => "decide",
            Scope::Steer => "steer",
        }
    }
}

/// A paired device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub id: String,
    pub name: String,
    pub scope: Scope,
    /// SHA-256 of its token, hex.
    pub hash: String,
    /// Unix seconds.
    pub paired_at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct DeviceFile {
    devices: Vec<Device>,
}

/// What a pairing code grants.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    scope: Scope,
    name: Option<String>,
    /// Unix seconds after which it is void.
    expires: u64,
}

/// Why a pairing did not pair.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairError {
    #[error(
        "this pairing code is unknown or was used already; run `playdeck web pair` for a new one"
    )]
    Unknown,
    #[error(
        "this pairing code expired (codes last {PAIRING_SECS} s); run `playdeck web pair` for a new one"
    )]
    Expired,
    #[error("{0}")]
    BadName(String),
    #[error("cannot record the device: {0}")]
    Io(String),
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `n` random bytes, hex.
pub fn random_hex(n: usize) -> String {
    use ring::rand::SecureRandom;
    let mut b = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("the system's random source works");
    hex(&b)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// SHA-256 of `text`, hex.
pub fn digest(text: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref())
}

/// The devices and pairing codes of one user.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The user's store: `<state>/web`.
    pub fn mine() -> Result<Store, String> {
        let dir = crate::store::index::state_dir()
            .ok_or("neither XDG_STATE_HOME nor HOME is set: nowhere to keep paired devices")?
            .join("web");
        Store::at(&dir)
    }

    /// A store in `dir`, made private (0700, the user's own, never a link).
    pub fn at(dir: &Path) -> Result<Store, String> {
        crate::files::private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        crate::files::private_dir(&dir.join("pairing"))
            .map_err(|e| format!("{}: {e}", dir.join("pairing").display()))?;
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self) -> PathBuf {
        self.dir.join("devices.json")
    }

    /// The paired devices (none when the file is not there yet).
    pub fn devices(&self) -> Result<Vec<Device>, String> {
        let path = self.file();
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice::<DeviceFile>(&b)
                .map(|f| f.devices)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    fn save(&self, devices: Vec<Device>) -> Result<(), String> {
        let text =
            serde_json::to_string_pretty(&DeviceFile { devices }).expect("devices serialise");
        crate::files::write_atomic(&self.file(), text.as_bytes())
            .map_err(|e| format!("{}: {e}", self.file().display()))
    }

    /// The device holding `token`, if it is still paired.
    pub fn device_of(&self, token: &str) -> Option<Device> {
        if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let h = digest(token);
        self.devices().ok()?.into_iter().find(|d| d.hash == h)
    }

    /// A new one-time code for a device of `scope` (named `name`, else by
    /// what pairs with it); void after [`PAIRING_SECS`].
    pub fn new_code(&self, scope: Scope, name: Option<String>) -> Result<String, String> {
        if let Some(why) = name
            .as_deref()
            .and_then(crate::control::via::bad_device_name)
        {
            return Err(why);
        }
        let code = random_hex(16);
        let p = Pending {
            scope,
            name,
            expires: now() + PAIRING_SECS,
        };
        let path = self.dir.join("pairing").join(digest(&code));
        let text = serde_json::to_string(&p).expect("a pairing serialises");
        crate::files::write_atomic(&path, text.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(code)
    }

    /// Pairs a device with `code` (once): its token, and the device.
    pub fn pair(&self, code: &str, name: Option<&str>) -> Result<(String, Device), PairError> {
        if code.len() != 32 || !code.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(PairError::Unknown);
        }
        let path = self.dir.join("pairing").join(digest(code));
        // Taken by renaming: of two who present the code, one wins.
        let taken = self
            .dir
            .join("pairing")
            .join(format!("taken-{}", random_hex(8)));
        std::fs::rename(&path, &taken).map_err(|_| PairError::Unknown)?;
        let read = std::fs::read(&taken);
        let _ = std::fs::remove_file(&taken);
        let p: Pending = read
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(PairError::Unknown)?;
        if now() > p.expires {
            return Err(PairError::Expired);
        }
        let name = p
            .name
            .or_else(|| name.map(str::to_string))
            .unwrap_or_else(|| "device".to_string());
        if let Some(why) = crate::control::via::bad_device_name(&name) {
            return Err(PairError::BadName(why));
        }
        let token = random_hex(32);
        let mut devices = self.devices().map_err(PairError::Io)?;
        let device = Device {
            id: format!("d{}", random_hex(4)),
            name,
            scope: p.scope,
            hash: digest(&token),
            paired_at: now(),
        };
        devices.push(device.clone());
        self.save(devices).map_err(PairError::Io)?;
        Ok((token, device))
    }

    /// Unpairs the devices named `which` (an id or a name): those removed.
    pub fn revoke(&self, which: &str) -> Result<Vec<Device>, String> {
        let (gone, kept): (Vec<Device>, Vec<Device>) = self
            .devices()?
            .into_iter()
            .partition(|d| d.id == which || d.name == which);
        if gone.is_empty() {
            return Err(format!(
                "no paired device {which:?}; `playdeck web devices` lists them"
            ));
        }
        self.save(kept)?;
        Ok(gone)
    }

    /// Removes codes past their time (a code never used leaves no file).
    pub fn sweep(&self) {
        let Ok(rd) = std::fs::read_dir(self.dir.join("pairing")) else {
            return;
        };
        for e in rd.filter_map(Result::ok) {
            let stale = std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<Pending>(&b).ok())
                .is_none_or(|p| now() > p.expires);
            if stale {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_pairs_once_and_only_its_hash_is_kept() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::at(&t.path().join("web")).unwrap();
        let code = s.new_code(Scope::Decide, Some("pixel-7".into())).unwrap();
        let (token, d) = s.pair(&code, None).unwrap();
        assert_eq!(d.name, "pixel-7");
        assert_eq!(s.device_of(&token).unwrap().id, d.id);
        assert_eq!(s.pair(&code, None).unwrap_err(), PairError::Unknown);
        let text = std::fs::read_to_string(s.dir().join("devices.json")).unwrap();
        assert!(!text.contains(&token), "the token itself is never written");
        assert!(!text.contains(&code));
        s.revoke("pixel-7").unwrap();
        assert!(s.device_of(&token).is_none());
    }

    #[test]
    fn an_expired_code_pairs_nothing() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::at(t.path()).unwrap();
        let code = s.new_code(Scope::Watch, None).unwrap();
        let path = s.dir().join("pairing").join(digest(&code));
        std::fs::write(&path, r#"{"scope":"watch","name":null,"expires":1}"#).unwrap();
        assert_eq!(s.pair(&code, None).unwrap_err(), PairError::Expired);
        assert!(s.devices().unwrap().is_empty());
    }
}
