//! The LEAD's alive map (docs/PROTOCOL.md, "ACKs to the leader, who is alive in the
//! LEAD"): a leader names the servers it heard directly within 2*HBT + RTT of the
//! LEAD, itself included. Followers count those servers as heard, for the heard counts
//! of their claims and for deciding a round early, so a window too short makes the
//! first claimant after a crash count too few (the round waits for a retry) and one too
//! long vouches for a server that is gone. Pinned here to the millisecond: heartbeat
//! 100 ms and RTT 20 ms give 220 ms.

mod corenet;

use corenet::{Net, ids};

const WINDOW_MS: u64 = 2 * 100 + 20;

/// A follower cut off (nothing from it) is heard once, by hand, `age` ms before a LEAD
/// of the leader; that LEAD names it exactly when `age` is within the window, and so
/// does every LEAD between.
#[test]
fn the_alive_map_names_a_server_heard_within_two_heartbeats_and_an_rtt() {
    let mut net = Net::new(3, 3);
    let l = net.settle();
    let leader = l as u16 + 1;
    let f = (l + 1) % 3;
    let fid = f as u16 + 1;
    net.down[f] = true;
    // Long enough that its last datagram is out of every LEAD's window.
    net.run(net.now + 1_000);
    net.run_to_next_lead(l, net.now + 1_000);
    let a = net.leads.last().expect("a LEAD").at;
    net.run_to_next_lead(l, net.now + 1_000);
    let b = net.leads.last().expect("a LEAD").at;
    let period = b - a;
    assert_eq!(period, 100, "LEADs leave every heartbeat");
    assert!(
        !net.leads.last().unwrap().alive.contains(fid),
        "a server silent for a second is not alive: {:?}",
        net.leads.last()
    );
    let mut covered = Vec::new();
    // Age 0 cannot be set up here: the LEAD leaves in the step of its millisecond,
    // before the hand-made hearing.
    for age in [
        1,
        100,
        WINDOW_MS - 1,
        WINDOW_MS,
        WINDOW_MS + 1,
        WINDOW_MS + 80,
    ] {
        // The first LEAD at least 400 ms ahead: the previous heard time is out of
        // its window by then.
        let ahead = net.now + 400;
        let target = b + (ahead - b).div_ceil(period) * period;
        let heard = target - age;
        net.run(heard);
        assert_eq!(net.now, heard);
        let t = net.t();
        net.nodes[l].handle_heard(t, fid);
        let from = net.leads.len();
        net.run(target + 1);
        let leads: Vec<_> = net.leads[from..]
            .iter()
            .filter(|x| x.from == leader)
            .collect();
        let at_target = leads
            .iter()
            .find(|x| x.at == target)
            .unwrap_or_else(|| panic!("no LEAD at {target} ms: {leads:?}"));
        for x in &leads {
            let want = x.at - heard <= WINDOW_MS;
            assert_eq!(
                x.alive.contains(fid),
                want,
                "heard at {heard} ms, LEAD at {} ms (age {}): alive {:?}",
                x.at,
                x.at - heard,
                ids(&x.alive)
            );
            assert!(x.alive.contains(leader), "the leader names itself");
        }
        covered.push((age, at_target.alive.contains(fid)));
    }
    assert_eq!(
        covered,
        vec![
            (1, true),
            (100, true),
            (WINDOW_MS - 1, true),
            (WINDOW_MS, true),
            (WINDOW_MS + 1, false),
            (WINDOW_MS + 80, false),
        ]
    );
}
