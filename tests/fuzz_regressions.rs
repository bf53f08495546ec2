//! Replays every input saved under fuzz/regressions through the fuzz harnesses, plus a
//! fixed set of seeds, so what the fuzzers found stays fixed (issue 6).

mod fuzz_harness;

use std::path::Path;

fn inputs(dir: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter(|p| p.is_file())
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

#[test]
fn decoder_inputs() {
    let saved = inputs("decode");
    for data in &saved {
        fuzz_harness::decode(data);
    }
    let mut rng = electd::rng::SplitMix64::new(1);
    for _ in 0..20_000 {
        let len = rng.below(80) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        fuzz_harness::decode(&data);
    }
    eprintln!("decoder: {} saved inputs replayed", saved.len());
}

#[test]
fn cluster_inputs() {
    let saved = inputs("node");
    for data in &saved {
        let _ = fuzz_harness::cluster(data);
    }
    // Random schedules too: the harness must hold for inputs no fuzzer has seen.
    let mut rng = electd::rng::SplitMix64::new(2);
    let (mut steps, mut elections, mut leases) = (0, 0, 0);
    for _ in 0..300 {
        let data: Vec<u8> = (0..4000).map(|_| rng.next_u64() as u8).collect();
        let (s, e, l) = fuzz_harness::cluster(&data);
        steps += s;
        elections += e;
        leases += l;
    }
    eprintln!(
        "cluster: {} saved inputs; random: {steps} steps, {elections} elections, {leases} steps with a lease",
        saved.len()
    );
    assert!(
        elections > 300 && leases > steps / 20,
        "the harness must exercise elections and leases"
    );
}
