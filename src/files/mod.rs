//! File helpers every layer uses: atomic writes, private directories and
//! files, fsync of a directory, and write-behind for large files. A leaf:
//! it imports nothing of playdeck, so the kernel's neighbours (agents,
//! palette, capacity) can keep their files private without reaching up
//! into the run directory's module.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

pub mod tail;
pub mod writeback;

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsync, rename, fsync of the directory. Readers see the old or
/// the new file, never half, and a power loss keeps one of them.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] with the content written by `fill` into a buffered
/// writer (large files are serialised straight to disk).
pub fn write_atomic_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<writeback::WriteBehind<'_>>) -> io::Result<T>,
) -> io::Result<T> {
    // An error names the file meant, not the temporary one beside it.
    let named = |e: io::Error| {
        // tempfile's errors name the temporary path: the OS error alone.
        let why = e.to_string();
        let why = why.split(" at path \"").next().unwrap_or(&why);
        io::Error::new(e.kind(), format!("cannot write {}: {why}", path.display()))
    };
    let (tmp, out) = write_temp(path, fill).map_err(named)?;
    commit_temp(tmp, path).map_err(named)?;
    Ok(out)
}

/// The first half of [`write_atomic_with`]: the content in a temporary
/// file beside `path`, written but not yet on disk.
pub fn write_temp<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<writeback::WriteBehind<'_>>) -> io::Result<T>,
) -> io::Result<(tempfile::NamedTempFile, T)> {
    let mut tmp = tempfile::NamedTempFile::new_in(parent_of(path))?;
    let out = {
        let mut w =
            BufWriter::with_capacity(256 * 1024, writeback::WriteBehind::new(tmp.as_file_mut()));
        let out = fill(&mut w)?;
        w.flush()?;
        out
    };
    Ok((tmp, out))
}

/// The second half: fsync, rename over `path`, fsync of the directory.
pub fn commit_temp(tmp: tempfile::NamedTempFile, path: &Path) -> io::Result<()> {
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(parent_of(path))
}

fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Why `path` is not yours alone, if it is not: owned by another user, or
/// writable by others (a shared 1777 project folder where another user
/// made `.playdeck`). None when it is yours, or not there.
pub fn not_yours(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::symlink_metadata(path).ok()?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Some(format!(
            "{} belongs to another user (uid {})",
            path.display(),
            meta.uid()
        ));
    }
    if meta.is_dir() && meta.mode() & 0o022 != 0 {
        return Some(format!(
            "{} can be written by other users (mode {:o})",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Creates `path` (and missing parents) for the owner only (0700): a run
/// directory holds agents' prompts, output and results. What is there
/// already must be a directory (never a link to one: its mode is set
/// through the directory itself, so a link planted in its place cannot
/// have playdeck change another directory) and the user's own — root
/// included, which never takes over another user's directory.
pub fn private_dir(path: &Path) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link or not a directory: playdeck uses only a directory of its own there",
                path.display()
            ),
        ),
        e => io::Error::from(e),
    })?;
    let st = rustix::fs::fstat(&fd)?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to another user (uid {}): playdeck uses only a directory of yours",
                path.display(),
                st.st_uid
            ),
        ));
    }
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
    Ok(())
}

/// Opens `path` for appending, creating it readable by the owner only;
/// never through a link planted in its place.
pub fn append_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| no_link(path, e))
}

/// A refusal to open through a link, naming it.
fn no_link(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        return io::Error::new(
            e.kind(),
            format!(
                "{} is a symbolic link: playdeck never writes through one",
                path.display()
            ),
        );
    }
    e
}

/// Opens `path` to write it afresh, creating it readable by the owner
/// only; never through a link planted in its place (an agent's
/// `logs/op.1.stdout.log -> ~/.bashrc` would be truncated).
pub fn create_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| no_link(path, e))
}

/// fsync of a directory: a rename or a new file in it survives power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A writer that counts what went through it.
pub struct Counted<W> {
    pub inner: W,
    pub n: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    // serde_json writes many small pieces: each goes to the buffer in one
    // call, not through the default write_all's loop.
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(buf)?;
        self.n += buf.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
