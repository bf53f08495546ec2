//! README's quickstart, as a newcomer runs it (issue 23, item 7): `conf/local-3.sh`
//! returns even when its output goes into a pipe (the daemons used to keep the pipe
//! open, so `conf/local-3.sh | grep leader` never ended), and `conf/local-3.sh watch`
//! watches through a server that does not lead, so the watcher outlives the leader
//! that `conf/local-3.sh kill-leader` kills and shows the next one.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn script(args: &[&str]) -> Command {
    let mut c = Command::new("conf/local-3.sh");
    c.args(args);
    c
}

/// Stops the quickstart's servers however the test ends.
struct Stop;
impl Drop for Stop {
    fn drop(&mut self) {
        let _ = script(&["stop"]).output();
    }
}

fn json_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &line[at..];
    Some(rest[..rest.find([',', '}'])?].trim_matches('"'))
}

#[test]
fn quickstart_returns_through_a_pipe_and_its_watcher_outlives_the_leader() {
    let _stop = Stop;
    let _ = script(&["stop"]).output();
    // Start, the output into a pipe that is read to its end: it must end.
    let mut start = Command::new("sh")
        .args(["-c", "conf/local-3.sh | cat"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let end = Instant::now() + Duration::from_secs(120);
    let reader = {
        let stdout = start.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stdout), &mut s);
            s
        })
    };
    loop {
        if start.try_wait().unwrap().is_some() && reader.is_finished() {
            out.push_str(&reader.join().unwrap());
            break;
        }
        if Instant::now() > end {
            let _ = start.kill();
            panic!("conf/local-3.sh | cat did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(out.contains("leader: "), "{out}");
    assert!(out.contains("conf/local-3.sh watch"), "{out}");
    // The watcher: its first line is its server's view, and that server follows.
    let mut watch = script(&["watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(json_field(&first, "role"), Some("follower"), "{first}");
    let old = json_field(&first, "leader").unwrap().to_string();
    let o = script(&["kill-leader"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The watcher reports the next leader (its reads end when the test ends).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let end = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    let next = loop {
        let left = end.saturating_duration_since(Instant::now());
        let Ok(l) = rx.recv_timeout(left) else {
            let _ = watch.kill();
            panic!("the watcher showed no new leader: {seen:?}");
        };
        let leader = json_field(&l, "leader").map(str::to_string);
        seen.push(l);
        if let Some(n) = leader.filter(|n| n != "null" && *n != old) {
            break n;
        }
    };
    let _ = watch.kill();
    let _ = watch.wait();
    assert_ne!(next, old);
}
