//! The external tier: tests that need software this repository does not
//! hold — the real agent CLIs (`tests/realcli/install.sh`), nats-server
//! (`tests/cluster/install.sh`), sshd (Debian's openssh-server). Built
//! only with `--features external`; a test whose program is not installed
//! says so and skips.

#[path = "../common/mod.rs"]
mod common;

mod browser;
mod cast;
mod cluster;
mod console_pty;
mod realcli;
