//! The fuzz corpus (`fuzz/corpus/<target>/`) replayed through the entry
//! points the fuzz targets call, on every `cargo test`: what a fuzzer once
//! found, or a seed, keeps passing without cargo-fuzz or nightly.

use std::path::Path;

use playdeck::fuzzing;

/// Runs every file of one target's corpus; returns how many there were.
fn replay(target: &str, entry: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|f| f.unwrap().path())
        .collect();
    files.sort();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        let caught = std::panic::catch_unwind(|| entry(&data));
        assert!(caught.is_ok(), "{target} failed on {}", f.display());
    }
    files.len()
}

#[test]
fn every_play_in_the_corpus_reads_or_is_refused_at_a_position() {
    assert!(replay("play_reader", fuzzing::play_reader) >= 10);
}

#[test]
fn every_request_in_the_corpus_is_extracted_or_refused_with_a_reason() {
    assert!(replay("spawn_requests", fuzzing::spawn_requests) >= 10);
}

#[test]
fn every_captured_stream_in_the_corpus_parses() {
    assert!(replay("agent_stream", fuzzing::agent_stream) >= 20);
}
