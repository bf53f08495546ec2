//! Swarm testing (issue 2, issue 10): random fault schedules drawn from many seeds.
//!
//! A quarter of the seeds run in multicast mode, the others in unicast, where a leader
//! at rest sends each LEAD only to the followers it asks to acknowledge it (issue 25,
//! targeted heartbeats; `multicast_for`). Each seed draws the cluster size (1..=9), the timers, the clock errors and a fault
//! schedule: partitions, one-way cuts, loss, duplication, long delays, pauses, crashes
//! and restarts, `elect` and `yield`. Every host runs an `electctl run` supervisor
//! (planned stops confirmed at once, within 1 ms, 50 ms or two holds, each a quarter of
//! the seeds; 10 % or 30 % of them never confirmed in half the seeds). Issue 10's
//! adversaries, each on in the share of seeds given:
//! - (a) genuine late copies of 0.5 %, 2 % or 5 % of datagrams, up to 2-8 s late (1/2);
//!   stall-and-flush of the traffic around a recent election or handoff (1/2);
//! - (b) 1 %, 5 % or 20 % of deliveries aimed 1 ns-1 ms either side of the receiver's
//!   faith end or a leader's lease end (1/2);
//! - (c) crashes 0-5 ms after a yield (1/2) and inside a state write (1/2);
//! - (d) per-server timers with sub-millisecond heartbeats, K and RTT (1/3), rolling
//!   reloads to other timers, often a much shorter hold (1/2);
//! - (e) clock rates at exactly +-rho from the start (1/3 of seeds with rho > 0), and
//!   flipped mid-run: the leader slow and the others fast, or the reverse (1/2);
//! - (f) loopback delays of 10-200 us with fast writes and precise timers (1/4);
//! - (g) whole-host suspends of up to four holds, the leader half of the time (1/2).
//!
//! The fault verbs are drawn every 20 ms-2 s, each with probability 1/18.
//!
//! Issue 11, in half the seeds (drawn from a generator of their own, so the other seeds
//! keep their schedules): with every third verb, a health fault: a check result now or
//! aimed within 1 ns-1 ms of a lease end, a faith end or a timer deadline, flapping
//! (two to six results within two heartbeats), every processor failing within a hold
//! (and recovering later), a healthy server cut off from all others, drains and
//! undrains (the leader half of the time), `yield ID` to a random target (unhealthy,
//! drained, cut off, itself, unknown) followed 0-5 ms later by a check result on either
//! side, the leader's processor failing, a round against the live leader followed by
//! its crash and immediate restart. Half of those seeds run checks (a daemon starts
//! unhealthy and learns its health up to half a hold later), half run preempt-delay (0,
//! or a few heartbeats up to 1.5 s more), priorities 0-2 in every seed. After the
//! faults, `health_epilogue` checks what the design promises (see `check_health`:
//! H-fit, H-stay, H-elect), then runs two to four episodes on the quiet network, each
//! with its own check: every other server unfit while the leader's own health flaps
//! (H-stay), then one recovers (H-fit); random flapping (H-fit, H-elect); `yield ID`
//! (H-yield: the named server, or priority then id); preempt-delay (H-preempt: not
//! before the delay, only through a RESIGN naming the server, a restart included);
//! drain of the leader (H-drain: to the best healthy server, or it stays; the drain
//! survives a restart). At the end: one leader, healthy, followed by the majority side,
//! of the highest priority with preempt-delay.
//!
//! Safety (S1-S5) is checked after every event. At the end of the faults everything
//! heals and the rolling reload completes (one set of timers); L1 must then hold within
//! its bound, and at the end of the run exactly one leader holds a lease and every
//! server follows it. An invariant of the core that breaks (strict mode panics) counts
//! as a violation.
//!
//! Issue 12, in a quarter of the seeds (again from a generator of their own): 2-4
//! election groups, group 0 with the seed's priorities and the others with random
//! preference orders, sharing datagrams (one bundle per destination per flush), the
//! state file and every host fault; `elect` and `yield` act on a random group. S1-S5 are
//! checked per group; after the faults, in the seeds without health faults, L1 and the
//! end state per group, then an independence episode: yields and rounds in one group
//! while no other group may change its leader or term or lose its lease ("I"). (A third
//! of the seeds was tried: the run took more than twice as long.)
//!
//! Issue 20, in a quarter of the seeds (from a generator of their own): after one fault
//! step in two or four, a LEAD episode (`lead_episode`). Half of them are two to six
//! random steps up to half a hold apart: a sitting leader's LEADs reach only a random
//! few for a heartbeat to three holds (lost, held to the end, or delayed: per-direction
//! holds of LEADs only, `Sim::hold_leads`), a sitting leader deaf to the others' LEADs
//! and claims (and half the time mute), `yield ID` naming the server that led before,
//! a round now (a sitting leader re-elected soon after its election), every hold ended.
//! The other half draw issue 20's shape (`two_leaderships`): at an election, before its
//! first LEAD leaves, the winner's LEADs reach a few and it hears nobody; someone else
//! is elected meanwhile and yields to it, or stops reaching most; the first is
//! re-elected and its new LEADs reach too few for a lease without the old term's ACKs.
//! A quarter of the episodes are an adversary for the floor (`floor_episode`): a sitting
//! leader re-elected while its lease is valid, whose new LEADs then reach too few.
//! With `reelect_keeps_acks` the swarm reaches two leases at once at seed 299 (35 of the
//! 10,000 default seeds; 161 and 45 before issue 22 moved the schedules). Every seed
//! also checks "S2-support" after every event (`Sim::check_support`): each lease must
//! rest on a majority that cannot vote for anyone else before it ends; it reports the
//! same sabotage at seed 35 (189 of the 10,000 seeds; 81 and 180 before), before any
//! second lease exists. (Since issue 24 the simulator drives
//! the daemon's own shell, `electd::host`; with its former copy: seeds 203 and 35.)
//!
//! Issue 21, in a quarter of the seeds (again from their own generator): after one step
//! in two or six, a host's supervisors stall for up to four holds (the leader's half
//! the time), then half the time the leader yields, crashes or is cut off. A stalled
//! supervisor reads no line and confirms nothing; its enforcer still ends the command
//! at the last lease end it was told (`Sim::stall_supervisor`). The negative control
//! `stall_enforcer` stalls the enforcer too (only a frozen host does that): S5 fails.
//!
//! Issue 22: P-cold (`cold_start_preference`): where a seed is a cold start (one set of
//! timers, every server starting within K*HBT, no check to rise), each group's first
//! leader elected before the first fault is its preferred server. It reads the record
//! and draws nothing, so no seed's schedule moves. Negative control: claims ranked
//! without preference (`Sabotage::unranked_claims`), caught at seed 12.
//! P-after (`Moves`, `pref_plan`, `rolling_restart`): half the seeds without health
//! faults run preempt-delay (a hold plus up to 1.5 s; half of those with groups take
//! `balance` orders), from a generator of their own (those seeds' schedules move, the
//! others' do not). Once the faults stop and every server is fit and heard, each
//! group's leader changes at most once, straight to its preferred server, and leads
//! there within preempt-delay + the L1 bound (+ H-preempt (end)'s slack); then a
//! rolling restart (one to three servers out by crash, SIGTERM or an unhealthy
//! processor, back in another order up to preempt-delay apart) is judged the same way.
//! P-after's "every server fit and heard" counts the leader's heartbeat on the slowest
//! clock (`slow_hbt`): a follower that turns fit says so only in its ACK of the next
//! LEAD, so a handover that began before then is no detour (seed 12914).
//! Negative control: preemption with detours (`Sabotage::preempt_detours`), caught at
//! seed 43, 122 of the 10,000 default seeds since issue 25's targeted heartbeats
//! (`multicast_for`) moved the schedules (seed 34, 127 before; 43 before the slow heartbeat moved the
//! rolling restarts that begin after P-after's end, also 127; 305 before issue 25's
//! compact wire and stop timers moved every schedule; 296 before its reads at the
//! heartbeat; seed 61, 22 of the first 2,000 seeds, before that).
//!
//! Issue 25, L-rest (`rest_episode`, docs/PROTOCOL.md "Sparse acknowledgements"): at
//! the end of every seed with one group and no health faults (N >= 3), after every
//! other check, the ACK-loss adversary (`Sim::lose_acks`) loses at most N-Q followers'
//! ACKs of each LEAD, aimed at those a sparse LEAD asked for, in two bursts (K+1 LEADs,
//! and 1 to K+1) on the quiet network with delays within RTT/2: the leader must keep
//! its lease without a gap (`Checker::lapses` included) and nobody may be elected. It
//! draws from the run's generator only then, so no other check or schedule moves.
//! Negative control: a leader sparse again right after a miss
//! (`Sabotage::sparse_ignores_misses`), caught at seed 7 (1,704 of the 10,000
//! default seeds; seed 6 and 1,807 before targeted heartbeats, 1,799 before the
//! reload below moved half the episodes' schedules).
//! In half the episodes (`rest_reload`, from a generator of its own, so the others keep
//! their schedules), just after a sparse LEAD before the first or the second burst,
//! every server is reloaded to a longer heartbeat (1 to K+1 times the leader's, K 3 or
//! 4) and the burst begins at the next sparse LEAD, the first decided with the new
//! timers; in a third of those the new heartbeat is aimed at the lease-held gate's
//! edge and every delay is RTT/2 (9 of the 10,000 seeds lapsed there while the gate
//! had no room for a late timer or a fast clock). Negative control: a leader sparse while the lease it holds,
//! from before the reload, ends before the next LEAD's ACKs can come
//! (`Sabotage::sparse_ignores_lease_held`), caught at seed 149 (200 before the
//! waiting datagrams shared their wakeup's flush, 36 and 364 before targeted
//! heartbeats; with `SWARM_NO_REST_RELOAD=1`, none).
//!
//! Targeted heartbeats, L-turn (`turn_episode`, docs/PROTOCOL.md "Targeted
//! heartbeats"): after L-rest, in the same seeds when the leader's K is 3 or more, the
//! LEAD-loss adversary (`Sim::lose_leads`) loses the copies of the second and the
//! third sparse LEAD of a run to the followers it names (at most N-Q), never two LEADs
//! in a row addressed to one follower, the LEAD before the gap as early as it can come
//! and the one after it RTT/2 late, on the quiet network (every process running,
//! same timers and clock rates, every delay within RTT/2): no server may send an ELECT.
//! The premise is checked from what the network recorded (`TurnRecord`), not from
//! the daemon's state. Negative controls: a named follower's timer at its faith
//! (`Sabotage::no_turn_wait`), caught at seed 311 (88 of the 10,000 default seeds),
//! and the first sparse LEAD after a dense one sent only to the followers it names
//! (`Sabotage::first_sparse_targeted`), caught at seed 103 (235 of them); no other
//! check of the swarm sees either.
//!
//! A drain on a stalled state disk, L-drain (`drain_stall_episode`, docs/PROTOCOL.md
//! "Durable state"): last, in every seed whose shape allows it (6,403 of the 10,000
//! default seeds; 1.8 % more events), a sitting leader is drained while its state disk
//! stalls (from up to a heartbeat before the drain, from the drain, or from just after
//! it, while the drain's write may be in flight): the most preferred fit server must be
//! elected and hold a lease within a planned handover's bound (`drain_bound`, about a
//! heartbeat, where the hold is at least two), while the disk is still stalled.
//! Negative control: a drain's write that holds every later datagram, the rule before
//! (`Sabotage::drain_write_holds_sends`), caught at seed 2 (4,291 of the 10,000
//! default seeds); no other check of the swarm sees it.
//!
//! A reload on a stalled state disk, L-reload (`reload_stall_episode`, docs/PROTOCOL.md
//! "Durable state"): after L-drain, in every one-group seed whose shape allows it (7,046
//! of the 10,000 default seeds), a sitting leader's state disk stalls and every server
//! is reloaded, each step within a heartbeat, in one of four sequences (`ReloadShape`,
//! a quarter of the episodes each: 1,766, 1,803, 1,750 and 1,727): once to longer
//! timers; longer, back to the timers in force, longer again; longer, longer still,
//! the first longer again; and the second review's D1, longer while the disk works
//! (that hold on disk and in force), then, stalled, back to the timers before and up
//! to the longer again while the write that lowered the hold is in flight. The stall
//! lasts two to three holds past the last step: the leader's leases must cover it
//! without a gap, nobody may be elected, and the last reload's heartbeat must be in
//! force on it within two writes' time of the thaw. Negative controls, none of which
//! another check of the swarm sees: a reload's timers in force at once, the rule
//! before (`Sabotage::reload_holds_sends`), caught at seed 2 (6,332 of the 10,000
//! default seeds); the hold measured against the disk's now, not the lowest that may
//! land (`Sabotage::disk_hold_bound`), caught at seed 4 (1,538: D1 alone); and a write
//! that only lowers the hold holding datagrams (`Sabotage::lowering_write_holds`),
//! caught at seed 2 (4,738: the three sequences that reload back).
//!
//! "S2-disk" (`sim/durable.rs`), in every seed: at every ACK that leaves, every lease
//! end a leader reports, every state write handed out and every reload, the shortest
//! quiet period a crash could leave (the lower of the disk's hold and the write in
//! flight's, or the configured hold if longer) must cover the faith the server
//! vouched for, from the simulator's own model of the disk, not the core's bound. It
//! found that a restart shed the promise read from disk at the first shorter LEAD (22
//! of the 10,000 default seeds); negative control `Sabotage::restart_sheds_promise`,
//! caught at seed 656. D2 (`Sabotage::disk_hold_bound` on a follower's stalled disk)
//! is shown in tests/reload_stall_adversary.rs, not here: L-reload stalls the leader's
//! disk only.
//!
//! A run that handles 20 million events (an ELECT storm) stops with a livelock
//! violation.
//!
//! `SWARM_SEEDS=n` runs n seeds (default 10,000; `SWARM_FROM=a` from seed a on),
//! `SWARM_SEED=s` runs one seed (in the negative controls too), `SWARM_COUNT=1` makes a
//! negative control run every seed and count those that catch it, `SWARM_HUNT=1` turns
//! issue 20's and 21's episodes on in every seed, `SWARM_NO_SUPPORT=1` turns the
//! S2-support check off (to see a breakage reach an overlap), `SIM_TRACE=1` prints the last events
//! of a failing seed (`SIM_TRACE_LINES`, `SIM_DUMP_NODES=1` for the nodes' state), and
//! `SWARM_KEEP_MIXED=1` keeps per-server timers after the faults (see the mixed-RTT
//! liveness finding), and `SWARM_NO_REST_RELOAD=1` takes L-rest's reload out.

mod sim;

use electd::node::Sabotage;
use sim::{AckLossPlan, AckLossReload, Kind, LeadHold, Options, Real, Sim, Timers, ms};
use std::io::Write;
use std::time::Duration;

const DEFAULT_SEEDS: u64 = 10_000;
const RUN: Real = ms(60_000);

/// A protocol or driver broken on purpose (negative controls), or nothing.
#[derive(Clone, Debug, Default)]
struct Breakage {
    sabotage: Sabotage,
    /// A suspended host's clock stops (CLOCK_MONOTONIC instead of BOOTTIME).
    monotonic: bool,
    /// The driver never tells the core about health.
    ignore_health: bool,
    /// The driver yields as soon as its leader turns unhealthy.
    naive_health_yield: bool,
    /// `yield ID` sends a plain yield.
    drop_yield_target: bool,
    /// Server 1 swaps groups 0 and 1 on receipt (issue 12).
    misroute_group: bool,
    /// `yield GROUP` resigns group 0 (issue 12).
    yield_wrong_group: bool,
    /// The host confirms a state write to the cores before it is durable (issue 24).
    confirm_early: bool,
    /// A supervisor stall stops its lease-end enforcer too (issue 21).
    stall_enforcer: bool,
    /// The host releases a RESIGN on any confirmation of a supervisor, even of a line
    /// older than the last leader line (issue 24).
    release_older: bool,
    /// A stop hands over nothing: the server exits while leading (issue 24).
    stop_without_yield: bool,
    /// A supervisor that leaves unconfirmed counts as clear (issue 24).
    departure_confirms: bool,
    /// The host arms supervisors' stop timers past the lease end (issue 25).
    timers_late: bool,
    /// Every host's datagrams always wait for its next wakeup (issue 25).
    defer_always: bool,
    /// Without the S2-support check (to see a broken protocol reach an actual overlap).
    no_support: bool,
}

/// What one seed found.
#[derive(Default)]
struct Outcome {
    events: u64,
    violations: Vec<String>,
    liveness: Option<String>,
    failover_ms: Vec<f64>,
    stats: sim::Stats,
    /// The seed had issue 11's health faults and checks.
    health: bool,
    /// Election groups the seed ran (issue 12).
    groups: usize,
    /// Elections in the independence episode's active group (issue 12).
    independent_rounds: usize,
    /// Groups whose cold start P-cold checked (issue 22).
    cold_checked: usize,
    /// P-after (issue 22): groups checked, and of those, groups that moved (once).
    after_checked: usize,
    after_moved: usize,
    /// P-after's rolling-restart episodes run.
    after_episodes: usize,
    /// L-rest (issue 25): episodes of bounded ACK loss at rest run, and in how many of
    /// them the leader's lease lapsed (a failure).
    rest_episodes: usize,
    rest_lapses: usize,
    /// L-turn: episodes of LEADs lost at rest run, and the drops they made.
    turn_episodes: usize,
    turn_drops: usize,
    /// L-drain: the episode's shape (0 the stall before the drain, 1 at it, 2 just
    /// after it) and how long the handover took, in ms, with its bound.
    drain_stall: Option<(u8, f64, f64)>,
    /// L-reload: an episode ran (reloads of every server on a leader whose disk
    /// stalled): its shape (`ReloadShape`), and how long after the thaw the last
    /// reload's timers were in force, in ms.
    reload_stall: Option<(u8, f64)>,
}

/// Which of issue 10's adversaries a seed turns on, besides the Options knobs.
#[derive(Clone, Debug, Default)]
struct Plan {
    /// Loopback-like network: 10-200 us one-way, fast disks, precise timers.
    tiny: bool,
    /// Stall-and-flush bursts of genuine old datagrams, aimed at recent elections
    /// and handoffs.
    flush: bool,
    /// Crash 0-5 ms after a yield.
    yield_crash: bool,
    /// Crash between a state write and its confirmation.
    write_crash: bool,
    /// Rolling reloads to other timers (sub-millisecond values, shorter holds).
    reloads: bool,
    /// Clock rates at exactly +-rho: the leader slow and the others fast, or reverse.
    clock_flips: bool,
    /// Whole-host suspends.
    suspends: bool,
    /// SIGTERM instead of a crash in the crash-and-restart fault (issue 24): the host
    /// hands over and exits, back within a hold.
    stops: bool,
}

/// A heartbeat base and per-server timers drawn around it: sub-millisecond offsets
/// (100.9 ms beside 100 ms), and K and RTT that differ.
fn draw_timers(draw: &mut impl FnMut(u64) -> u64, base_ms: u64) -> Timers {
    let frac = if draw(2) == 0 { draw(1_000_000) } else { 0 };
    let heartbeat = Duration::from_nanos(base_ms * 1_000_000 + frac);
    let rtt = match draw(3) {
        0 => Duration::from_millis(20),
        1 => heartbeat / 5,
        _ => Duration::from_nanos(heartbeat.as_nanos() as u64 / 4 + draw(1_000_000)),
    };
    Timers {
        heartbeat,
        rtt,
        k: 2 + draw(3) as u32,
    }
}

const TIMER_BASES_MS: [u64; 5] = [100, 100, 192, 250, 480];

fn options_for(seed: u64) -> (Options, Plan) {
    let mut rng = electd::rng::SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5A5A);
    let mut draw = |b: u64| rng.below(b);
    let n = 1 + draw(9) as usize;
    let mut o = Options::new(seed, n);
    o.k = 2 + draw(3) as u32;
    o.drift_ppm = [0, 10_000, 50_000][draw(3) as usize];
    o.clock_error_ppm = draw(u64::from(o.drift_ppm) + 1) as u32;
    if draw(4) == 0 {
        o.heartbeat = Duration::from_millis(250);
        o.rtt = Duration::from_millis(40);
    }
    let witnesses = draw((n as u64 - 1) / 2 + 1);
    o.witnesses = (0..witnesses).map(|i| n as u16 - i as u16).collect();
    o.priorities = (1..=n as u16).map(|id| (id, draw(3) as u8)).collect();
    o.start_spread = draw(ms(500));
    // The supervisor of every host: a planned stop is confirmed at once, within a
    // heartbeat, or after up to two holds (capped by the lease end); sometimes never.
    o.confirm_max = [0, ms(1), ms(50), 2 * o.hold()][draw(4) as usize];
    o.confirm_hung_pm = [0, 0, 100, 300][draw(4) as usize];
    // Supervisors that confirm twice, or an older line first (issue 24): in the seeds
    // with a tenth hung, so that no other seed's draws move.
    o.confirm_twice_pm = if o.confirm_hung_pm == 100 { 250 } else { 0 };
    o.timer_slop = [ms(1), ms(1), 0, 50_000][draw(4) as usize];
    // A quarter of the seeds, from the seed itself: no other seed's draws move.
    let mut p = Plan {
        stops: seed % 4 == 3,
        ..Plan::default()
    };
    // (f) loopback-like delays in a quarter of the seeds.
    if draw(4) == 0 {
        p.tiny = true;
        o.delay_min = 10_000;
        o.delay_max = 10_000 + draw(190_000);
        o.persist_max = 10_000 + draw(190_000);
        o.timer_slop = [0, 0, 50_000][draw(3) as usize];
    }
    // (d) timers that differ per server, in a third of the seeds.
    if draw(3) == 0 {
        let base = TIMER_BASES_MS[draw(TIMER_BASES_MS.len() as u64) as usize];
        o.timers = (0..n).map(|_| draw_timers(&mut draw, base)).collect();
    }
    // (e) clock rates at exactly +-rho, in a third of the seeds.
    if draw(3) == 0 && o.drift_ppm > 0 {
        let d = i64::from(o.drift_ppm);
        o.clock_errors = (0..n).map(|_| if draw(2) == 0 { d } else { -d }).collect();
    }
    // (a) genuine old datagrams delivered late, up to four holds after they were sent.
    if draw(2) == 0 {
        o.late_pm = [5, 20, 50][draw(3) as usize];
        o.late_max = (1 + draw(4)) * ms(2000);
    }
    // (b) deliveries aimed at faith and lease ends.
    if draw(2) == 0 {
        o.aim_pm = [10, 50, 200][draw(3) as usize];
    }
    p.flush = draw(2) == 0;
    p.yield_crash = draw(2) == 0;
    p.write_crash = draw(2) == 0;
    p.reloads = draw(2) == 0;
    p.clock_flips = o.drift_ppm > 0 && draw(2) == 0;
    p.suspends = draw(2) == 0;
    (o, p)
}

/// The longest hold any server runs with now.
fn max_hold(s: &Sim) -> Real {
    s.hosts.iter().map(|h| h.timers.hold()).max().unwrap_or(0)
}

/// SPEC 8 L1 with the longest timers now in force: 5*HBT + 8*RTT.
fn l1_bound(s: &Sim) -> Real {
    let hbt = s
        .hosts
        .iter()
        .map(|h| h.timers.heartbeat)
        .max()
        .unwrap_or_default();
    let rtt = s
        .hosts
        .iter()
        .map(|h| h.timers.rtt)
        .max()
        .unwrap_or_default();
    5 * hbt.as_nanos() as u64 + 8 * rtt.as_nanos() as u64
}

/// Runs one seed; a panic (an invariant of the core, in strict mode) is a violation.
fn run_seed(seed: u64, broken: &Breakage) -> Outcome {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_seed_inner(seed, broken)
    }));
    r.unwrap_or_else(|e| {
        let what = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Outcome {
            violations: vec![format!("panic: {what}")],
            ..Outcome::default()
        }
    })
}

/// A quarter of the seeds run in multicast mode (every datagram reaches every
/// server); the rest in unicast, where a steady leader sends each LEAD only to the
/// followers it asks (issue 25, targeted heartbeats). Drawn apart from the options, so
/// a seed's other draws are what they were before.
fn multicast_for(seed: u64) -> bool {
    electd::rng::SplitMix64::new(seed.wrapping_mul(0xA24B_AED4_963E_E407) ^ 0x6D63).below(4) == 0
}

/// Runs one seed with its fault schedule; `broken` breaks the protocol or the driver
/// on purpose (negative controls).
fn run_seed_inner(seed: u64, broken: &Breakage) -> Outcome {
    let (mut o, plan) = options_for(seed);
    o.multicast = multicast_for(seed);
    let hp = health_plan(seed, &mut o);
    let groups = group_plan(seed, &mut o);
    let pp = pref_plan(seed, hp.on, &mut o);
    o.misroute_group = broken.misroute_group;
    o.yield_wrong_group = broken.yield_wrong_group;
    o.confirm_early = broken.confirm_early;
    o.release_on_older_confirmation = broken.release_older;
    o.stop_without_yield = broken.stop_without_yield;
    o.departure_confirms = broken.departure_confirms;
    o.timers_late = broken.timers_late;
    o.defer_always = broken.defer_always;
    o.sabotage = broken.sabotage.clone();
    o.monotonic_suspend = broken.monotonic;
    o.ignore_health = broken.ignore_health;
    o.naive_health_yield = broken.naive_health_yield;
    o.drop_yield_target = broken.drop_yield_target;
    o.stall_enforcer = broken.stall_enforcer;
    o.check_support = !broken.no_support && std::env::var_os("SWARM_NO_SUPPORT").is_none();
    let lp = lead_plan(seed);
    let sp = stall_plan(seed);
    let n = o.n as u16;
    let rtt = o.rtt.as_nanos() as u64;
    let tiny = plan.tiny;
    let base = TIMER_BASES_MS[(seed % TIMER_BASES_MS.len() as u64) as usize];
    let mut s = Sim::new(o);
    let mut longest_hold = max_hold(&s).max(s.opts.hold());
    let fault_end = ms(20_000) + s.rand(ms(25_000));
    let mut restarts: Vec<(Real, u16)> = Vec::new();
    let mut worst_delay = s.opts.delay_max;
    let mut out = Outcome {
        health: hp.on,
        groups,
        ..Outcome::default()
    };
    let mut t = 0;
    // The first fault verb's time: elections before it are a cold start's (P-cold).
    let mut first_fault = None;
    while t < fault_end && s.check.violations.is_empty() {
        t = (t + ms(20) + s.rand(ms(2000))).min(fault_end);
        s.run_until(t);
        first_fault.get_or_insert(t);
        restarts.retain(|&(at, id)| {
            if at <= t {
                s.restart(id);
            }
            at > t
        });
        let hold = max_hold(&s);
        let id = 1 + s.rand(u64::from(n)) as u16;
        match s.rand(18) {
            0 => {
                let side: Vec<u16> = (1..=n).filter(|_| s.rand(2) == 0).collect();
                s.partition(&side);
            }
            1 => {
                let other = 1 + s.rand(u64::from(n)) as u16;
                if other != id {
                    s.cut_one_way(id, other);
                }
            }
            2 | 3 => s.heal(),
            4 if s.is_up(id) => {
                let leader_first = s.leader().filter(|_| s.rand(2) == 0).unwrap_or(id);
                s.crash(leader_first);
                restarts.push((t + s.rand(ms(3000)), leader_first));
            }
            5 => {
                let victim = s.leader().filter(|_| s.rand(2) == 0).unwrap_or(id);
                let d = s.rand(3 * hold);
                s.pause(victim, d);
            }
            6 => {
                s.opts.loss_pm = s.rand(300) as u32;
                s.opts.dup_pm = s.rand(100) as u32;
            }
            7 => {
                s.opts.delay_max = if tiny {
                    s.opts.delay_min + s.rand(200_000)
                } else {
                    ms(1) + s.rand(3 * rtt)
                };
                worst_delay = worst_delay.max(s.opts.delay_max);
            }
            // With groups, a round or a yield in one of them (drawn only then, so
            // one-group seeds keep their schedules).
            8 => {
                let g = pick_group(&mut s, groups);
                s.elect_in(g, id);
            }
            9 => {
                let g = pick_group(&mut s, groups);
                if let Some(l) = s.leader_in(g) {
                    s.resign_in(g, l);
                    if plan.stops {
                        // Its supervisors lose their connections while the RESIGN
                        // waits for them (issue 24): it must wait for the lease end
                        // they were told.
                        s.reconnect_supervisors(l);
                    }
                }
            }
            // Crash and restart at once: the restarted node must keep its promises.
            // With `stops`, a SIGTERM instead: it hands over, exits, is back within a
            // hold (a rolling restart).
            10 if s.is_up(id) => {
                if plan.stops {
                    let back = s.rand(hold);
                    s.stop(id, Some(back));
                } else {
                    s.crash(id);
                    s.restart(id);
                }
            }
            11 => {
                if let Some(l) = s.leader() {
                    let t0 = s.now;
                    s.crash(l);
                    restarts.push((t0 + s.rand(ms(1000)), l));
                    if let Some((_, t1)) = s.run_until_new_leader(l, ms(3000)) {
                        out.failover_ms.push((t1 - t0) as f64 / 1e6);
                    }
                    t = s.now;
                }
            }
            // (c) a crash 0-5 ms after a yield; back at once or within a hold.
            12 if plan.yield_crash => {
                if let Some(l) = s.leader() {
                    s.resign(l);
                    let at = s.now + s.rand(ms(5));
                    let back = if s.rand(2) == 0 { 0 } else { s.rand(hold) };
                    s.crash_at(l, at, Some(back));
                }
            }
            // (c) a crash between a state write and its confirmation.
            13 if plan.write_crash => {
                let victim = s.leader().filter(|_| s.rand(2) == 0).unwrap_or(id);
                s.crash_in_write(victim);
            }
            // (a) a queue that held a window of traffic flushes it now: the datagrams
            // sent around a recent election or handoff, or any recent moment.
            14 if plan.flush => {
                let marks = s.marks.len() as u64;
                let center = if marks > 0 && s.rand(4) != 0 {
                    let k = (marks - 1 - s.rand(marks.min(4))) as usize;
                    s.marks[k]
                } else {
                    s.now.saturating_sub(s.rand(4 * hold))
                };
                let w = 1 + s.rand(hold);
                let spread = s.rand(hold);
                s.flush(center.saturating_sub(w / 2), center + w / 2, spread);
            }
            // (d) a rolling reload to other timers over up to a hold (sometimes a much
            // shorter hold than the leader's).
            15 if plan.reloads => {
                let b = if s.rand(3) == 0 {
                    TIMER_BASES_MS[s.rand(TIMER_BASES_MS.len() as u64) as usize]
                } else {
                    base
                };
                let mut d = |x: u64| s.rand(x);
                let common = draw_timers(&mut d, b);
                let spread = s.rand(hold);
                for target in 1..=n {
                    let timers = if s.rand(4) == 0 {
                        let mut d = |x: u64| s.rand(x);
                        draw_timers(&mut d, b)
                    } else {
                        common
                    };
                    longest_hold = longest_hold.max(timers.hold());
                    let at = s.now + s.rand(spread + 1);
                    s.reload_at(target, at, timers);
                }
            }
            // (e) clock rates at the extremes: the leader slow and the others fast, or
            // the reverse.
            16 if plan.clock_flips => {
                let d = i64::from(s.opts.drift_ppm);
                let sign = if s.rand(2) == 0 { 1 } else { -1 };
                let leader = s.leader().unwrap_or(id);
                for x in 1..=n {
                    let e = if x == leader { -sign * d } else { sign * d };
                    s.set_clock_rate(x, e);
                }
            }
            // (g) a whole host suspended, the leader half of the time.
            17 if plan.suspends => {
                let victim = s.leader().filter(|_| s.rand(2) == 0).unwrap_or(id);
                let d = s.rand(4 * hold);
                s.suspend(victim, d);
            }
            _ => {}
        }
        // Issue 11: health, drain and yield-to faults, in a third of the steps.
        if hp.on && s.rand(3) == 0 {
            health_fault(&mut s, id, hold);
        }
        // Issue 20: an episode of asymmetric LEAD delivery, concurrent leaderships and
        // re-elections (it runs the simulation on).
        if lp.on && s.rand(lp.every) == 0 {
            lead_episode(&mut s, hold);
            t = t.max(s.now);
        }
        // Issue 21: a stalled supervisor, often followed by a handoff of its leader.
        if sp.on && s.rand(sp.every) == 0 {
            stall_fault(&mut s, id, hold);
        }
    }
    // Issue 22: the cold start followed the preference (read from the record, no draw).
    if s.check.violations.is_empty() {
        let (checked, found) = cold_start_preference(&s, first_fault.unwrap_or(fault_end), groups);
        out.cold_checked = checked;
        out.liveness = found;
        if out.liveness.is_some() {
            out.events = s.events;
            out.stats = s.stats.clone();
            if s.opts.trace {
                s.dump_trace();
            }
            return out;
        }
    }
    if !s.check.violations.is_empty() {
        // Stop at the first violation, so a trace ends where it went wrong.
        if s.opts.trace {
            s.dump_trace();
        }
        out.events = s.events;
        out.violations = s.check.violations.clone();
        out.stats = s.stats.clone();
        return out;
    }
    // The faults stop: every link heals, every process runs, no more late datagrams.
    s.heal();
    s.free_leads();
    s.opts.loss_pm = 0;
    s.opts.dup_pm = 0;
    s.opts.late_pm = 0;
    s.opts.aim_pm = 0;
    s.opts.delay_max = if tiny { s.opts.delay_min } else { rtt / 4 };
    s.disarm();
    for id in 1..=n {
        if !s.is_up(id) {
            s.restart(id);
        }
        s.resume(id);
    }
    // Issue 11: the health when the faults stop (changes still scheduled are dropped:
    // aimed ones may lie holds ahead), and a server left cut off.
    let iso = if hp.on {
        s.cancel_health_changes();
        health_settle(&mut s, &hp)
    } else {
        None
    };
    // The rolling reload completes: every server ends on one set of timers (L1 is
    // stated for one RTT and HBT). With SWARM_KEEP_MIXED=1 mixed timers stay, which
    // shows the liveness finding reported with issue 10 (rounds of different lengths
    // that never agree on a term).
    // Decided by the plan, not by the timers now: a rolling reload may still be under
    // way with per-server variants.
    let mixed = plan.reloads || !s.opts.timers.is_empty();
    if mixed && std::env::var_os("SWARM_KEEP_MIXED").is_none() {
        let mut d = |x: u64| s.rand(x);
        let last = draw_timers(&mut d, base);
        // After every reload still under way (each spreads over at most a hold).
        let at = s.now + longest_hold;
        longest_hold = longest_hold.max(last.hold());
        for id in 1..=n {
            s.reload_at(id, at, last);
        }
    }
    // Stable once the late copies still in flight, pending reloads and crashes, and
    // the longest hold promise have run out (L1 counts from a quiet network).
    let stable =
        s.now + 2 * longest_hold.max(max_hold(&s)) + s.opts.late_max + worst_delay + ms(10);
    s.run_until(stable);
    let mut t0 = stable;
    for id in 1..=n {
        if !s.is_up(id) {
            s.restart(id);
            // Its quiet period and its check's rise.
            t0 = stable + longest_hold.max(max_hold(&s)) + s.opts.rise_max;
        }
    }
    if hp.on {
        // Every daemon knows its health and may be elected: checks risen, quiet over.
        let t0 = t0.max(s.settle_time());
        out.liveness = health_epilogue(&mut s, &hp, iso, t0);
        // A drain on a stalled disk (L-drain): last, so that nothing else moves.
        if out.liveness.is_none() && s.check.violations.is_empty() {
            out.liveness = drain_stall_episode(&mut s, iso, &mut out);
        }
        // A reload on a stalled disk (L-reload): after L-drain, for the same reason.
        if out.liveness.is_none() && s.check.violations.is_empty() {
            out.liveness = reload_stall_episode(&mut s, iso, &mut out);
        }
        out.events = s.events;
        out.violations = s.check.violations.clone();
        out.stats = s.stats.clone();
        if (!out.violations.is_empty() || out.liveness.is_some()) && s.opts.trace {
            s.dump_trace();
        }
        return out;
    }
    let bound = l1_bound(&s);
    // L1's premise is a majority that has run past its quiet period (docs/PROTOCOL.md,
    // "L1 after a reload to shorter timers"): a server that restarted with a hold
    // promise on disk longer than K*HBT (made under longer timers before a reload) may
    // not vote until it has passed, and SPEC 8's "run for at least K*HBT" was that
    // period only while the promise was no longer than K*HBT (swarm seed 22471).
    let l1_from = majority_quiet_end(&s).max(stable);
    // Issue 22, P-after: from once every server is fit and heard, each group's leader
    // changes at most once, to its preferred server, within preempt-delay and the bound.
    let after = pp.on.then(|| {
        s.run_until(t0 + report_time(&s));
        Moves::begin(&s)
    });
    let end = after.as_ref().map_or(0, |w| w.start + settle_bound(&s));
    s.run_until(RUN.max(l1_from + bound + ms(5000)).max(end));
    out.events = s.events;
    out.violations = s.check.violations.clone();
    // L1 and the end state per group (issue 12): every group has its leader.
    for g in 0..groups {
        if !out.violations.is_empty() || out.liveness.is_some() {
            break;
        }
        out.liveness = group_liveness(&s, g, l1_from, bound);
    }
    if let Some(w) = after.filter(|_| out.violations.is_empty() && out.liveness.is_none()) {
        let (moved, found) = w.judge(&s, "after the faults");
        out.after_checked += w.holders.len();
        out.after_moved += moved;
        out.liveness = found;
        if out.liveness.is_none() {
            out.after_episodes += 1;
            let (checked, moved, found) = rolling_restart(&mut s, &pp);
            out.after_checked += checked;
            out.after_moved += moved;
            out.liveness = found;
            out.events = s.events;
            out.violations = s.check.violations.clone();
        }
    }
    if out.violations.is_empty() && out.liveness.is_none() && groups > 1 {
        out.liveness = independence_episode(&mut s, groups, &mut out.independent_rounds);
        out.violations = s.check.violations.clone();
    }
    // The lease at rest under bounded ACK loss ("L-rest", issue 25's sparse
    // acknowledgements): last, so that no other check or schedule moves.
    if out.violations.is_empty() && out.liveness.is_none() {
        out.liveness = rest_episode(&mut s, &mut out);
        out.events = s.events;
        out.violations = s.check.violations.clone();
    }
    // Needless rounds at rest under single lost LEADs ("L-turn", targeted heartbeats):
    // after L-rest, so that no other check or schedule moves.
    if out.violations.is_empty() && out.liveness.is_none() {
        out.liveness = turn_episode(&mut s, &mut out);
        out.events = s.events;
        out.violations = s.check.violations.clone();
    }
    // A drain on a stalled disk (L-drain): after L-turn, so that no other check or
    // schedule moves.
    if out.violations.is_empty() && out.liveness.is_none() {
        out.liveness = drain_stall_episode(&mut s, None, &mut out);
        out.events = s.events;
        out.violations = s.check.violations.clone();
    }
    // A reload on a stalled disk (L-reload): after L-drain, for the same reason.
    if out.violations.is_empty() && out.liveness.is_none() {
        out.liveness = reload_stall_episode(&mut s, None, &mut out);
        out.events = s.events;
        out.violations = s.check.violations.clone();
    }
    out.stats = s.stats.clone();
    if (!out.violations.is_empty() || out.liveness.is_some()) && s.opts.trace {
        s.dump_trace();
        if std::env::var_os("SIM_DUMP_NODES").is_some() {
            for h in &s.hosts {
                eprintln!(
                    "host {} local {:?}: {:#?}",
                    h.id,
                    h.clock.local(s.now),
                    h.nodes().collect::<Vec<_>>()
                );
            }
        }
    }
    out
}

/// The instant by which a majority of the servers is up and past its quiet period
/// (max(K*HBT, the hold promise on disk at its start)); 0 when no majority is up.
fn majority_quiet_end(s: &Sim) -> Real {
    let mut ends: Vec<Real> = s
        .hosts
        .iter()
        .filter(|h| h.up())
        .map(|h| h.quiet_end())
        .collect();
    ends.sort_unstable();
    let majority = s.opts.n / 2 + 1;
    ends.get(majority - 1).copied().unwrap_or(0)
}

/// L1 from `stable` and one leader that every server follows at the end, in group `g`.
fn group_liveness(s: &Sim, g: usize, stable: Real, bound: Real) -> Option<String> {
    let n = s.opts.n as u16;
    let name = if g == 0 {
        String::new()
    } else {
        format!(" (group {g})")
    };
    match s.checks(g).first_lease_from(stable) {
        Some(at) if at - stable <= bound => {}
        other => {
            return Some(format!(
                "L1{name}: no lease within {} ms of stabilising at {} ms (first: {:?})",
                bound / ms(1),
                stable / ms(1),
                other.map(|a| (a - stable) / ms(1))
            ));
        }
    }
    let leaders = s.leaders_in(g);
    let agree = (1..=n).all(|id| {
        s.status_in(g, id)
            .is_some_and(|st| Some(st.leader) == leaders.first().map(|&l| Some(l)))
    });
    if leaders.len() != 1 || !agree {
        let views: Vec<String> = (1..=n)
            .map(|id| match s.status_in(g, id) {
                Some(st) => format!("{id}:{}/t{}/l{:?}", st.role.name(), st.term, st.leader),
                None => format!("{id}:down"),
            })
            .collect();
        return Some(format!(
            "end{name}: leaders {leaders:?}, views {}",
            views.join(" ")
        ));
    }
    None
}

// ----- issue 25: the lease at rest under bounded ACK loss ---------------------------

/// The streak of clean heartbeats a new leadership needs before it goes sparse
/// (`core::leadership::SPARSE_AFTER`).
const SPARSE_AFTER: u32 = 16;

/// "L-rest" (issue 25, sparse acknowledgements; docs/PROTOCOL.md): while every server
/// runs and every link is up, a LEAD and its ACK each take at most RTT/2, nothing but
/// followers' ACKs to the leader is lost, and of each LEAD at most N-Q of them are lost
/// or come after the next LEAD (a majority would still acknowledge every LEAD that
/// asked everyone: what a leader that asks every follower needs to keep its lease),
/// the leader keeps its lease without a gap and nobody is elected. The ACK-loss
/// adversary (`Sim::lose_acks`) keeps to that premise and aims at the ACKs a sparse
/// LEAD asked for, in two bursts in either order: one of K+1 LEADs (the one that
/// catches `Sabotage::sparse_ignores_misses`), and one of 1 to K+1 (often a single
/// LEAD's ACKs), each begun at the next sparse LEAD, or after 2*16+4 dense ones (the
/// streak needed doubles at each miss of a sparse LEAD, and may have grown under the
/// faults). A lost ACK is dropped, or (a tenth or a quarter of them in two thirds of
/// the episodes) delivered a heartbeat to K+2 heartbeats late. In half the episodes
/// every server is reloaded to a longer heartbeat just after a sparse LEAD, before one
/// of the bursts (`rest_reload`, where the premise's timing at the reload is stated).
/// Runs at the end of the seeds without health faults and with one group, on the quiet
/// network the end state was checked on (N >= 3: with two servers N-Q is 0).
fn rest_episode(s: &mut Sim, out: &mut Outcome) -> Option<String> {
    let n = s.opts.n;
    if n < 3 || s.opts.groups > 1 {
        return None;
    }
    let all_run = (1..=n as u16).all(|id| s.is_up(id) && !s.is_paused(id));
    let l = s.leader().filter(|_| all_run)?;
    let h = &s.hosts[usize::from(l) - 1];
    let (hbt, k) = (h.timers.heartbeat.as_nanos() as u64, h.timers.k);
    let rtt = s
        .hosts
        .iter()
        .map(|h| h.timers.rtt.as_nanos() as u64)
        .min()
        .unwrap_or_default();
    // The premise's timing: each way within RTT/2 of the shortest RTT configured.
    s.opts.delay_max = s.opts.delay_max.min(rtt / 2);
    s.opts.delay_min = s.opts.delay_min.min(s.opts.delay_max);
    let term = s.status(l).map_or(0, |st| st.term);
    let won = s.check.won.len();
    let lapsed = s.check.lapses.len();
    // The long burst first or second; with K = 2 the lease never allows sparse LEADs
    // (`lease_len > 2*HBT + RTT`), so there is no sparse LEAD to wait for.
    let other = 1 + s.rand(u64::from(k) + 1) as u32;
    let bursts = if s.rand(2) == 0 {
        vec![k + 1, other]
    } else {
        vec![other, k + 1]
    };
    let late_pm = [0, 100, 250][s.rand(3) as usize];
    let lease_len = h_lease_len(s, l);
    let reload = rest_reload(s, hbt, k, rtt, lease_len);
    // The longest heartbeat and K of the episode, before or after its reload.
    let (hbt_max, k_max) = reload.as_ref().map_or((hbt, k), |r| {
        let t = r.timers;
        (hbt.max(t.heartbeat.as_nanos() as u64), k.max(t.k))
    });
    let plan = AckLossPlan {
        bursts,
        max_wait: if k >= 3 { 2 * SPARSE_AFTER + 4 } else { 2 },
        late_pm,
        late_by: hbt,
        late_spread: (u64::from(k) + 1) * hbt,
        reload,
    };
    if !s.lose_acks(l, plan) {
        return None;
    }
    out.rest_episodes += 1;
    let reloads = s.stats.ack_loss_reloads;
    let t0 = s.now;
    let limit = t0 + 200 * hbt_max;
    while s.losing_acks() && s.now < limit && s.check.violations.is_empty() {
        s.run_for(hbt_max);
    }
    s.stop_losing_acks();
    // A lease that rests on the LEAD before the last burst ends within a hold of it.
    s.run_for(2 * u64::from(k_max) * hbt_max);
    if !s.check.violations.is_empty() {
        return None;
    }
    let t1 = s.now;
    let elected = s.check.won[won..].first().copied();
    // A lapse renewed at the very next status report shows in no interval.
    let silent = s.check.lapses[lapsed..]
        .iter()
        .find(|x| x.0 == l)
        .map(|x| x.1);
    if s.checks(0).lease_covers(l, t0, t1) && elected.is_none() && silent.is_none() {
        return None;
    }
    out.rest_lapses += 1;
    let reach = s.checks(0).lease_reach(l, t0, t1);
    let reach = silent.map_or(reach, |at| at.min(reach));
    let reloaded = if s.stats.ack_loss_reloads > reloads {
        let t = s.hosts[usize::from(l) - 1].timers;
        format!(
            ", reloaded while sparse to K={}, heartbeat {} us, RTT {} us",
            t.k,
            t.heartbeat.as_micros(),
            t.rtt.as_micros()
        )
    } else {
        String::new()
    };
    Some(format!(
        "L-rest: leader {l} (term {term}, {n} servers, K={k}, heartbeat {} us{reloaded}) lost \
         its lease at {} ms while each LEAD lost at most {} ACKs (from {} ms); elected \
         since: {elected:?}",
        hbt / 1000,
        reach / ms(1),
        n - (n / 2 + 1),
        t0 / ms(1),
    ))
}

/// The lease length, in ns, of server `l`'s core as configured now.
fn h_lease_len(s: &Sim, l: u16) -> u64 {
    s.hosts[usize::from(l) - 1]
        .node()
        .map_or(0, |x| x.lease_len().as_nanos() as u64)
}

/// L-rest's reload (`AckLossReload`), in half the episodes, from a generator of its own
/// (the other episodes keep their schedules); `SWARM_NO_REST_RELOAD=1` turns it off.
/// Before the first or the second burst, just after a sparse LEAD, every server is
/// reloaded within half a heartbeat to a longer heartbeat (1 to K+1 times the leader's,
/// to the nanosecond), K of 3 or 4 (K = 2 never goes sparse) and an RTT drawn as
/// `draw_timers` draws one. The leader's lease then rests on LEADs sent with the old,
/// shorter lease: past (K-1)*HBT - RTT of the old timers, a leader that goes sparse on
/// the new timers alone loses its lease to the asked ACKs of the first LEAD after the
/// reload (`Sabotage::sparse_ignores_lease_held`). From the reload on each way takes
/// at most RTT/2 of the shortest RTT before and after, L-rest's plain premise: the
/// lease-held gate of `Node::asked_acks` leaves RTT/4 of room for the next LEAD's
/// timer and the leader's clock (timers at most 1 ms late, rates within 5 %).
///
/// In a third of them the new heartbeat is aimed at the gate's edge: the lease held
/// from the LEAD just sent (`lease_len`, the old lease length) outlasts the next LEAD's
/// due time plus the new heartbeat and RTT by at most RTT/4 + 2 ms, so the first LEAD
/// decided with the new timers may just be allowed to go sparse, and its ACK is lost;
/// and every delay from the reload on is RTT/2, the longest the premise allows. The
/// gate must leave room for what the premise allows beyond RTT on the leader's clock:
/// its timer late, its clock's rate. Without that room (`u > now + HBT + RTT` exactly)
/// 9 of the 10,000 default seeds lapsed here.
fn rest_reload(s: &Sim, hbt: u64, k: u32, rtt: u64, lease_len: u64) -> Option<AckLossReload> {
    let mut rng =
        electd::rng::SplitMix64::new(s.opts.seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x2E10);
    if std::env::var_os("SWARM_NO_REST_RELOAD").is_some() || rng.below(2) == 0 {
        return None;
    }
    let before = rng.below(2) as usize;
    let aim = rng.below(3) == 0;
    let (heartbeat, new_rtt) = if aim {
        let new_rtt = if rng.below(2) == 0 { ms(20) } else { rtt };
        let edge = lease_len.saturating_sub(hbt + new_rtt + rng.below(new_rtt / 4 + 2_000_000));
        (edge.max(hbt + 1), new_rtt)
    } else {
        let heartbeat = hbt + 1 + rng.below(u64::from(k) * hbt);
        let new_rtt = match rng.below(3) {
            0 => ms(20),
            1 => heartbeat / 5,
            _ => heartbeat / 4 + rng.below(1_000_000),
        };
        (heartbeat, new_rtt)
    };
    let timers = Timers {
        heartbeat: Duration::from_nanos(heartbeat),
        rtt: Duration::from_nanos(new_rtt),
        k: 3 + rng.below(2) as u32,
    };
    let after = (0..s.opts.n).map(|_| rng.below(hbt / 2)).collect();
    Some(AckLossReload {
        before,
        timers,
        after,
        delay_max: rtt.min(new_rtt) / 2,
        delay_fixed: aim,
        late_by: heartbeat,
        late_spread: (u64::from(timers.k) + 1) * heartbeat,
    })
}

// ----- targeted heartbeats: no needless round under one lost LEAD --------------------

/// "L-turn" (docs/PROTOCOL.md, "Targeted heartbeats"): no server opens a round (sends
/// an ELECT) against a leader it follows while, from the outside, nothing gave it
/// reason to: every process runs unpaused (none crashes, pauses or is suspended:
/// `Sim::incarnations`), no timers are reloaded and no clock changes its rate, every
/// link loses nothing but copies of the leader's LEADs and delivers every datagram
/// within RTT/2 of the shortest RTT configured, and no follower loses two LEADs in a
/// row of those addressed to it. The LEAD-loss adversary (`Sim::lose_leads`, which
/// records those facts as the network saw them: `TurnRecord`) keeps to that premise
/// and loses the copies of the second or the third sparse LEAD of a run to the
/// followers it names (both, in a random order), the LEAD before such a gap as early
/// as it can come and the one after it as late (RTT/2).
///
/// The premise is narrower than "while the leader is healthy" on purpose: the check
/// runs on the quiet network at the end of a seed, after L-rest, not under the swarm's
/// faults. Under them the leader's health and reachability are not facts the network
/// alone can state (a late copy of an old LEAD, an aimed delivery, a LEAD hold, a lost
/// ACK that moves the leader's lease, an `elect` command, a supervisor stall or a
/// drain each give a server a reason of its own to start a round), and a premise that
/// enumerated those would restate the daemon's rules. Runs in the seeds L-rest runs
/// in (one group, no health faults, N >= 3) whose leader has K >= 3 (at K = 2 a lease
/// never allows a sparse LEAD: no LEAD is targeted). Draws from a generator of its
/// own; it runs last, so nothing else moves.
fn turn_episode(s: &mut Sim, out: &mut Outcome) -> Option<String> {
    let n = s.opts.n;
    if n < 3 || s.opts.groups > 1 {
        return None;
    }
    let all_run = (1..=n as u16).all(|id| s.is_up(id) && !s.is_paused(id));
    let l = s.leader().filter(|_| all_run)?;
    if !(1..=n as u16).all(|id| s.status(id).is_some_and(|st| st.leader == Some(l))) {
        return None;
    }
    let h = &s.hosts[usize::from(l) - 1];
    let (hbt, k) = (h.timers.heartbeat.as_nanos() as u64, h.timers.k);
    if k < 3 {
        return None;
    }
    let rtt = s
        .hosts
        .iter()
        .map(|h| h.timers.rtt.as_nanos() as u64)
        .min()
        .unwrap_or_default();
    let slow = rtt / 2;
    s.opts.delay_max = s.opts.delay_max.min(slow);
    s.opts.delay_min = s.opts.delay_min.min(s.opts.delay_max);
    let mut rng =
        electd::rng::SplitMix64::new(s.opts.seed.wrapping_mul(0x94D0_49BB_1331_11EB) ^ 0x7475);
    let drops = if rng.below(2) == 0 {
        vec![1, 2]
    } else {
        vec![2, 1]
    };
    let plan = sim::LeadLossPlan {
        drops,
        fast: s.opts.delay_min,
        slow,
    };
    let term = s.status(l).map_or(0, |st| st.term);
    let won = s.check.won.len();
    let incs = s.incarnations();
    let reloads = s.stats.reloads;
    let rates: Vec<i64> = s.hosts.iter().map(|h| h.clock.error_ppm()).collect();
    if !s.lose_leads(l, plan) {
        return None;
    }
    out.turn_episodes += 1;
    let t0 = s.now;
    // Each drop doubles the streak of clean heartbeats the leader needs before it is
    // sparse again (16 at least; L-rest's misses may have doubled it twice already).
    let limit = t0 + 400 * hbt;
    while s.losing_leads() && s.now < limit && s.check.violations.is_empty() {
        s.run_for(hbt);
    }
    // The faith of the last LEAD before a gap, and a round after it, are over.
    s.run_for(2 * u64::from(k) * hbt);
    let rec = s.stop_losing_leads();
    out.turn_drops += rec.drops;
    if !s.check.violations.is_empty() {
        return None;
    }
    let ran = (1..=n as u16).all(|id| s.is_up(id) && !s.is_paused(id)) && s.incarnations() == incs;
    let same = s.stats.reloads == reloads
        && s.hosts
            .iter()
            .map(|h| h.clock.error_ppm())
            .eq(rates.iter().copied());
    if !ran || !same || rec.two_in_a_row.is_some() || rec.max_delay > slow {
        return Some(format!(
            "L-turn: the adversary broke its premise (all ran {ran}, same timers and rates \
             {same}, two LEADs in a row lost {:?}, longest delay {} us of {} us)",
            rec.two_in_a_row,
            rec.max_delay / 1000,
            slow / 1000
        ));
    }
    let elected = s.check.won[won..].first().copied();
    if rec.elects.is_empty() && elected.is_none() {
        return None;
    }
    let mode = if s.opts.multicast {
        "multicast"
    } else {
        "unicast"
    };
    Some(format!(
        "L-turn: leader {l} (term {term}, {n} servers, K={k}, heartbeat {} us, RTT/2 {} us, \
         {mode}) ran with every link up; {} of its {} LEADs ({} sparse) lost to a follower, \
         never two in a row addressed to one ({} drops from {} ms); yet ELECTs were sent: \
         {:?} (t ms, server, term); elected since: {elected:?}",
        hbt / 1000,
        slow / 1000,
        rec.lost,
        rec.leads,
        rec.sparse,
        rec.drops,
        t0 / ms(1),
        rec.elects
            .iter()
            .take(4)
            .map(|e| (e.0 / ms(1), e.1, e.2))
            .collect::<Vec<_>>(),
    ))
}

// ----- issue 22: preference ---------------------------------------------------------

/// The server group `g` prefers: the highest priority there (its `prefer` order, or the
/// servers' priorities), then the smallest id; never a witness (SPEC section 14).
fn preferred_of(o: &Options, g: usize) -> Option<u16> {
    (1..=o.n as u16)
        .filter(|x| !o.witnesses.contains(x))
        .max_by_key(|&x| (o.priority(g, x), std::cmp::Reverse(x)))
}

/// P-cold (SPEC section 14, issue 22): servers that start within K*HBT of each other,
/// healthy, elect each group's preferred server first, whatever order they start and
/// claim in, without preempt-delay to correct it. Checked where the seed is such a cold
/// start: one set of timers, every server starting within K*HBT, no check to rise
/// (`checks` starts every daemon unhealthy), and only for a group whose first election
/// came before the first fault verb (the faults may begin before any election).
/// After the faults, preference is H-preempt's (end): with preempt-delay the leader
/// is the fit server of highest priority.
/// Returns how many groups it checked, and the first failure.
fn cold_start_preference(s: &Sim, first_fault: Real, groups: usize) -> (usize, Option<String>) {
    let o = &s.opts;
    if !o.timers.is_empty() || o.start_spread > o.hold() || o.checks {
        return (0, None);
    }
    let mut checked = 0;
    for g in 0..groups {
        let Some(&(at, who, term)) = s.checks(g).won.first() else {
            continue;
        };
        let want = preferred_of(o, g);
        checked += usize::from(at < first_fault);
        if at < first_fault && Some(who) != want {
            let name = if g == 0 {
                String::new()
            } else {
                format!(" (group {g})")
            };
            return (
                checked,
                Some(format!(
                    "P-cold{name}: first leader {who} in term {term} at {} ms, preferred {want:?} \
                 (starts within {} ms, K*HBT {} ms)",
                    at / ms(1),
                    o.start_spread / ms(1),
                    o.hold() / ms(1)
                )),
            );
        }
    }
    (checked, None)
}

/// P-after's share of a seed (issue 22), drawn from a generator of its own: half the
/// seeds without issue 11's health faults run `preempt-delay` (a hold plus up to
/// 1.5 s), and half of those with groups take `balance` orders (the servers that may
/// lead, rotated) instead of random `prefer` orders. Those seeds' schedules move (a
/// leader now hands back to its preferred server during the faults too); the others'
/// do not.
#[derive(Clone, Debug, Default)]
struct PrefPlan {
    on: bool,
    delay: Real,
}

fn pref_plan(seed: u64, health: bool, o: &mut Options) -> PrefPlan {
    let mut r = electd::rng::SplitMix64::new(seed.wrapping_mul(0x94D0_49BB_1331_11EB) ^ 0x22);
    if health || r.below(2) != 0 {
        return PrefPlan::default();
    }
    let delay = o.hold() + r.below(ms(1500));
    o.preempt_delay = Some(Duration::from_nanos(delay));
    if o.groups > 1 && r.below(2) == 0 {
        let ids: Vec<u16> = (1..=o.n as u16)
            .filter(|x| !o.witnesses.contains(x))
            .collect();
        o.prefer = (0..o.groups)
            .map(|k| electd::config::balanced_order(&ids, k))
            .collect();
    }
    PrefPlan { on: true, delay }
}

/// How long a change reaches every leader once the network is quiet: a heartbeat, an
/// ACK's two delays, writes and a late timer (as `Quiet::report`). The heartbeat is
/// counted in real time on the slowest clock (`slow_hbt`): a follower reports its
/// health only in the ACK of its leader's next LEAD.
fn report_time(s: &Sim) -> Real {
    slow_hbt(s) + 2 * s.opts.delay_max + 2 * s.opts.persist_max + s.opts.timer_slop + ms(1)
}

/// The longest heartbeat in real time: HBT/(1 - rho) on a clock that runs slow by the
/// drift bound (or by more, if a host was given a larger error). A leader's LEADs are
/// that far apart, and a follower that turns fit between two of them can say so only
/// in its ACK of the second. Counted at the nominal rate, P-after began judging up to
/// HBT*rho/(1-rho) before the leader could have heard the last server turn fit: seed
/// 12914 (rho 5 %, the leader's clock flipped to -rho, HBT 480 ms, so LEADs 505 ms
/// apart) began 1.7 ms before the LEAD whose ACK first said that server 3 was fit;
/// at that LEAD's tick the leader, knowing 3 only as unfit (its ACK of the previous
/// LEAD), handed group 3 to server 2, fit for preempt-delay, as SPEC 14 and the
/// no-detour rule (most preferred server *known* fit) said, and 2 handed over to 3 a
/// delay later: a detour the check counted although it began before every server was
/// fit and heard. (Since the seventh round a preemption first asks every follower and
/// waits for the answers of the servers preferred to its successor, so that leader
/// now goes straight to 3; the window stays, as a follower's report is that late.)
fn slow_hbt(s: &Sim) -> Real {
    let slow = s
        .hosts
        .iter()
        .map(|h| -h.clock.error_ppm())
        .chain([i64::from(s.opts.drift_ppm)])
        .max()
        .unwrap_or(0)
        .clamp(0, 999_999) as u128;
    let hbt = u128::from(max_hbt(s));
    (hbt * 1_000_000).div_ceil(1_000_000 - slow) as Real
}

/// How long after every server is fit and heard each group must be on its preferred
/// server: preempt-delay (a tenth more for the leader's clock rate), then the handover
/// and its round within the L1 bound plus a heartbeat, with H-preempt (end)'s slack:
/// the bound twice and 2 s.
fn settle_bound(s: &Sim) -> Real {
    let delay = s.opts.preempt_delay.map_or(0, |d| d.as_nanos() as u64);
    delay + delay / 10 + 2 * (l1_bound(s) + max_hbt(s)) + ms(2000)
}

/// The servers group `g` prefers to all others: those of its highest priority that
/// may lead (one with a `prefer` order; possibly several with the servers' priorities).
fn top_of(o: &Options, g: usize) -> Vec<u16> {
    let may: Vec<u16> = (1..=o.n as u16)
        .filter(|x| !o.witnesses.contains(x))
        .collect();
    let top = may.iter().map(|&x| o.priority(g, x)).max();
    may.into_iter()
        .filter(|&x| Some(o.priority(g, x)) == top)
        .collect()
}

/// P-after's watch of every group's leaders from `start`, a moment at which every
/// server is fit and heard.
struct Moves {
    start: Real,
    /// Each group's lease holder at `start`.
    holders: Vec<Option<u16>>,
    /// Each group's count of elections won before `start`.
    won: Vec<usize>,
}

impl Moves {
    fn begin(s: &Sim) -> Moves {
        let groups = s.opts.groups.max(1);
        Moves {
            start: s.now,
            holders: s.group_leaders(),
            won: (0..groups).map(|g| s.checks(g).won.len()).collect(),
        }
    }

    /// P-after (SPEC sections 14 and 15, issue 22), judged now (at least
    /// `settle_bound` after `start`): each group is led by its preferred server, and
    /// its leader changed at most once since `start`, straight to that server (no
    /// detour through a third, so its processor started once). Returns how many groups
    /// moved, and the first failure.
    fn judge(&self, s: &Sim, tag: &str) -> (usize, Option<String>) {
        let mut moved = 0;
        for (g, holder) in self.holders.iter().enumerate() {
            // Preemption needs strictly higher priority (SPEC section 14): with a tie
            // at the top (servers' priorities in group 0), any of them keeps the seat.
            let want = top_of(&s.opts, g);
            let mut seq: Vec<u16> = holder.iter().copied().collect();
            for w in &s.checks(g).won[self.won[g]..] {
                if seq.last() != Some(&w.1) {
                    seq.push(w.1);
                }
            }
            let name = if g == 0 {
                String::new()
            } else {
                format!(" (group {g})")
            };
            let now = s.leaders_in(g);
            let fine = matches!(now[..], [l] if want.contains(&l));
            if !fine || seq.len() > 2 {
                let wins: Vec<String> = s.checks(g).won[self.won[g]..]
                    .iter()
                    .map(|w| format!("{}@{}ms/t{}", w.1, w.0 / ms(1), w.2))
                    .collect();
                return (
                    moved,
                    Some(format!(
                        "P-after{name} ({tag}): leaders {now:?} at {} ms, preferred {want:?}; \
                         from {} ms (every server fit and heard) the leader went {seq:?} \
                         (elections {wins:?}), preempt-delay {} ms",
                        s.now / ms(1),
                        self.start / ms(1),
                        s.opts.preempt_delay.map_or(0, |d| d.as_millis())
                    )),
                );
            }
            moved += usize::from(seq.len() == 2);
        }
        (moved, None)
    }
}

/// P-after's episode on the quiet network: a rolling restart. One to three servers
/// that may lead (half the time a group's first two or three choices) are taken out
/// one after another (crash, SIGTERM, or an unhealthy
/// processor; never more processes down than a majority can spare), each some time
/// up to a hold and the bound after the last, then brought back in another order, each
/// up to preempt-delay after the last (so one comes back while another's delay still
/// counts). Once every server is fit and heard, `Moves` judges (a server that returned
/// first and has been fit for the delay must not take a group whose first choice
/// returned later).
/// Returns the groups checked and moved, and the first failure.
fn rolling_restart(s: &mut Sim, pp: &PrefPlan) -> (usize, usize, Option<String>) {
    let n = s.opts.n as u16;
    let leaders: Vec<u16> = (1..=n).filter(|x| !s.opts.witnesses.contains(x)).collect();
    if n < 3 || leaders.len() < 2 {
        return (0, 0, None);
    }
    let k = 1 + s.rand((leaders.len() as u64 - 1).min(3)) as usize;
    // Half the time a group's first choices (at least two, so that one of them may
    // come back before the other), else any.
    let victims: Vec<u16> = if s.rand(2) == 0 {
        let g = s.rand(s.opts.groups.max(1) as u64) as usize;
        let mut order = leaders.clone();
        order.sort_by_key(|&x| (std::cmp::Reverse(s.opts.priority(g, x)), x));
        order.truncate(k.max(2));
        order
    } else {
        let mut v = shuffled(s, leaders.clone());
        v.truncate(k);
        v
    };
    let victims = &victims[..];
    let mut spare = n - (n / 2 + 1);
    let hold = max_hold(s);
    let gap = hold + l1_bound(s);
    // 0 crash, 1 SIGTERM, 2 unhealthy.
    let mut how = Vec::new();
    for &v in victims {
        let mut m = s.rand(3);
        if m < 2 && spare == 0 {
            m = 2;
        }
        match m {
            0 => s.crash(v),
            1 => s.stop(v, None),
            _ => s.set_health(v, false),
        }
        spare -= u16::from(m < 2);
        how.push((v, m));
        let d = s.rand(gap);
        s.run_for(d);
    }
    let back = shuffled(s, victims.to_vec());
    for (i, &v) in back.iter().enumerate() {
        let m = how.iter().find(|h| h.0 == v).map_or(2, |h| h.1);
        if m < 2 {
            // A SIGTERM's handover may still be under way: at most the lease.
            let limit = s.now + 4 * hold;
            while s.is_up(v) && s.now < limit && s.check.violations.is_empty() {
                s.run_for(ms(5));
            }
            if s.is_up(v) {
                return (
                    0,
                    0,
                    Some(format!("P-after: server {v} never exited after SIGTERM")),
                );
            }
            s.restart(v);
        } else {
            s.set_health(v, true);
        }
        if i + 1 < back.len() {
            let d = s.rand(pp.delay);
            s.run_for(d);
        }
    }
    let start = s.settle_time() + report_time(s);
    s.run_until(start);
    let w = Moves::begin(s);
    let end = start + settle_bound(s);
    s.run_until(end);
    if !s.check.violations.is_empty() {
        return (0, 0, None);
    }
    let (moved, found) = w.judge(
        s,
        &format!("rolling restart of {how:?}, back in order {back:?}"),
    );
    (w.holders.len(), moved, found)
}

// ----- issue 12: election groups ----------------------------------------------------

/// A quarter of the seeds run 2..=4 election groups, drawn from a generator of their own
/// (the other seeds keep their schedules): group 0 keeps the seed's priorities, every
/// other group gets a random preference order (first = highest priority). Returns the
/// number of groups.
fn group_plan(seed: u64, o: &mut Options) -> usize {
    let mut r = electd::rng::SplitMix64::new(seed.wrapping_mul(0xA24B_AED4_963E_E407) ^ 0x12);
    if r.below(4) != 0 {
        return 1;
    }
    let groups = 2 + r.below(3) as usize;
    o.groups = groups;
    o.prefer = (0..groups)
        .map(|g| {
            let mut order: Vec<u16> = (1..=o.n as u16).collect();
            if g > 0 {
                for i in (1..order.len()).rev() {
                    order.swap(i, r.below(i as u64 + 1) as usize);
                }
            } else {
                order.clear();
            }
            order
        })
        .collect();
    groups
}

/// The group a verb acts on: 0 with one group (no draw), else a random one.
fn pick_group(s: &mut Sim, groups: usize) -> usize {
    if groups > 1 {
        s.rand(groups as u64) as usize
    } else {
        0
    }
}

/// On the quiet network, one group has yields and rounds while the independence watch
/// runs: no other group's leader or term may change ("I"), and no other group's lease
/// may lapse.
fn independence_episode(s: &mut Sim, groups: usize, rounds: &mut usize) -> Option<String> {
    let n = s.opts.n as u16;
    let active = s.rand(groups as u64) as usize;
    let before = s.group_leaders();
    let won = s.checks(active).won.len();
    let t0 = s.now;
    s.watch(active);
    let hold = max_hold(s);
    for _ in 0..2 + s.rand(3) {
        if !s.check.violations.is_empty() {
            break;
        }
        if let Some(l) = s.leader_in(active) {
            if s.rand(2) == 0 {
                s.resign_in(active, l);
            } else {
                let f = 1 + s.rand(u64::from(n)) as u16;
                s.elect_in(active, f);
            }
        }
        let d = hold + s.rand(2 * hold);
        s.run_for(d);
    }
    s.unwatch();
    *rounds += s.checks(active).won.len() - won;
    if !s.check.violations.is_empty() {
        return None;
    }
    for g in (0..groups).filter(|&g| g != active) {
        let Some(l) = before[g] else { continue };
        if !s.checks(g).lease_covers(l, t0, s.now) {
            return Some(format!(
                "I: group {g}: leader {l} lost its lease between {} and {} ms while only \
                 group {active} had rounds",
                t0 / ms(1),
                s.now / ms(1)
            ));
        }
    }
    None
}

// ----- issue 20: asymmetric LEAD delivery, concurrent leaderships, re-elections -------

/// Issue 20's share of a seed, drawn from a generator of its own (the other seeds keep
/// their schedules).
#[derive(Clone, Debug, Default)]
struct LeadPlan {
    on: bool,
    /// An episode follows a fault step with probability 1/every.
    every: u64,
}

/// A quarter of the seeds have LEAD episodes (n >= 3), after one step in two or four.
fn lead_plan(seed: u64) -> LeadPlan {
    let mut r = electd::rng::SplitMix64::new(seed.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ 0x20);
    if hunting() {
        return LeadPlan { on: true, every: 2 };
    }
    if r.below(4) != 0 {
        return LeadPlan::default();
    }
    LeadPlan {
        on: true,
        every: [2, 4][r.below(2) as usize],
    }
}

/// `SWARM_HUNT=1`: issue 20's and 21's episodes in every seed (a hunt, not the default).
fn hunting() -> bool {
    std::env::var_os("SWARM_HUNT").is_some()
}

/// How a LEAD hold treats what it catches: lost (half), held to the end of the hold, or
/// delayed by up to a hold.
fn draw_lead_hold(s: &mut Sim, hold: Real) -> LeadHold {
    match s.rand(4) {
        0 | 1 => LeadHold::Drop,
        2 => LeadHold::Hold,
        _ => LeadHold::Delay(1 + s.rand(hold)),
    }
}

/// The servers that lead now (a sitting leader, with or without a lease), or a random
/// server if none does.
fn sitting(s: &mut Sim) -> Vec<u16> {
    let n = s.opts.n as u16;
    let l: Vec<u16> = (1..=n)
        .filter(|&id| {
            s.hosts[usize::from(id) - 1]
                .node()
                .is_some_and(|x| x.leads().is_some())
        })
        .collect();
    if l.is_empty() {
        vec![1 + s.rand(u64::from(n)) as u16]
    } else {
        l
    }
}

/// Issue 20's traffic shape, drawn: two to six steps, up to a hold apart, each one of
/// - a split: a sitting leader's LEADs reach only a random set of the others (often a
///   minority), so the rest elect someone else while it leads on;
/// - a deaf leader: nobody's LEADs reach a sitting leader, so it never learns of the
///   leadership that replaced it;
/// - a yield that names the server that led before (`yield ID` of the previous winner);
/// - a round now (`elect` on a random server): a sitting leader that keeps enough faith
///   is re-elected in a higher term soon after its election;
/// - every LEAD hold ends.
///
/// Holds last a heartbeat to three holds; what they catch is lost, held to their end or
/// delayed.
fn lead_episode(s: &mut Sim, hold: Real) {
    let n = s.opts.n as u16;
    if n < 3 {
        return;
    }
    s.stats.lead_episodes += 1;
    match s.rand(4) {
        0 | 1 => return two_leaderships(s, hold),
        2 => return floor_episode(s, hold),
        _ => {}
    }
    let hbt = s.opts.heartbeat.as_nanos() as u64;
    for _ in 0..2 + s.rand(5) {
        if !s.check.violations.is_empty() {
            return;
        }
        let leaders = sitting(s);
        let a = leaders[s.rand(leaders.len() as u64) as usize];
        let until = s.now + hbt + s.rand(3 * hold);
        match s.rand(6) {
            0 | 1 => {
                let how = draw_lead_hold(s, hold);
                let reach = 1 + s.rand(u64::from(n) / 2 + 1);
                for to in (1..=n).filter(|&x| x != a) {
                    let blocked = s.rand(u64::from(n)) >= reach;
                    let end = if blocked { until } else { s.now };
                    s.hold_leads(a, to, end, how);
                }
            }
            2 => {
                // Deaf, and half the time mute too: its claims do not reach the others.
                let how = draw_lead_hold(s, hold);
                let mute = s.rand(2) == 0;
                for x in (1..=n).filter(|&x| x != a) {
                    s.hold_kind(Kind::Lead, x, a, until, how);
                    s.hold_kind(Kind::Elect, x, a, until, LeadHold::Drop);
                    if mute {
                        s.hold_kind(Kind::Elect, a, x, until, LeadHold::Drop);
                    }
                }
            }
            3 => {
                if let Some(l) = s.leader() {
                    let prev = s.check.won.iter().rev().find(|w| w.1 != l).map(|w| w.1);
                    if prev.is_some() {
                        s.yield_to(l, prev);
                    }
                }
            }
            4 => {
                let id = 1 + s.rand(u64::from(n)) as u16;
                s.elect(id);
            }
            _ => s.free_leads(),
        }
        let d = 1 + s.rand(hold / 2);
        s.run_for(d);
    }
}

/// `ids` in a random order.
fn shuffled(s: &mut Sim, mut ids: Vec<u16>) -> Vec<u16> {
    for i in (1..ids.len()).rev() {
        let j = s.rand(i as u64 + 1) as usize;
        ids.swap(i, j);
    }
    ids
}

/// Runs until a server in `who` wins a round after the `since`-th election recorded, at
/// most `limit`; returns it.
fn run_until_won(s: &mut Sim, since: usize, who: &[u16], limit: Real) -> Option<u16> {
    let end = s.now + limit;
    let step = (s.opts.heartbeat.as_nanos() as u64 / 20).max(ms(1));
    while s.now < end && s.check.violations.is_empty() {
        if let Some(w) = s.check.won[since..].iter().find(|w| who.contains(&w.1)) {
            return Some(w.1);
        }
        s.run_for(step);
    }
    None
}

/// The roles of a `two_leaderships` episode, as its hooks fill them in.
#[derive(Clone, Debug, Default)]
struct Roles {
    /// The leader whose LEADs reach only `f`.
    a: Option<u16>,
    f: Vec<u16>,
    r: Vec<u16>,
    /// The leader elected meanwhile by others.
    b: Option<u16>,
}

/// The servers other than `a`, shuffled, split into a few (1..=Q-2, at least one) and
/// the rest.
fn split_others(s: &mut Sim, a: u16) -> (Vec<u16>, Vec<u16>) {
    let n = s.opts.n as u16;
    let others = shuffled(s, (1..=n).filter(|&x| x != a).collect());
    let q = usize::from(n) / 2 + 1;
    let k = 1 + s.rand(q.saturating_sub(2).max(1) as u64) as usize;
    let (f, r) = others.split_at(k.min(others.len() - 1));
    (f.to_vec(), r.to_vec())
}

/// Two leaderships at once, then a re-election of the first (issue 20's shape, drawn).
/// A round is started (a plain yield of the leader, a yield to someone, or `elect`
/// anywhere, which re-elects a sitting leader that keeps its followers' faith). At the
/// election, before the first LEAD of the term leaves, the winner A's LEADs are made to
/// reach only a few followers F (often too few for a lease), A stops hearing the others'
/// LEADs and claims, and half the time A's claims, or F's, do not reach the rest R
/// either. When someone else (B) wins a round, A hears claims again, and either B's
/// LEADs reach everyone but A and B yields to A once it holds a lease (a yield naming
/// the previous leader: its RESIGN releases B's followers), or B's LEADs reach only a
/// few and its claims nobody. If A is re-elected, its new LEADs reach only a few of R
/// (F's acknowledgements of the old term are then stale), and half the time its claims
/// and theirs do not reach the others, who may elect someone else. Every hold ends
/// within a few holds; sets, modes and lengths are drawn, and a step whose
/// precondition fails (nobody wins in time) ends the episode.
fn two_leaderships(s: &mut Sim, hold: Real) {
    use std::cell::RefCell;
    use std::rc::Rc;
    let n = s.opts.n as u16;
    let q = u64::from(n) / 2 + 1;
    let hbt = s.opts.heartbeat.as_nanos() as u64;
    let roles = Rc::new(RefCell::new(Roles::default()));
    let ro = Rc::clone(&roles);
    s.on_elected = Some(Box::new(move |s: &mut Sim, a: u16, _| {
        let (f, r) = split_others(s, a);
        let end = s.now + hold + s.rand(2 * hold);
        let how = draw_lead_hold(s, hold);
        for &x in &r {
            s.hold_leads(a, x, end, how);
        }
        for &x in f.iter().chain(&r) {
            s.hold_kind(Kind::Lead, x, a, end, LeadHold::Drop);
            s.hold_kind(Kind::Elect, x, a, end, LeadHold::Drop);
        }
        let (mute_a, mute_f) = (s.rand(2) == 0, s.rand(2) == 0);
        for &x in &r {
            if mute_a {
                s.hold_kind(Kind::Elect, a, x, end, LeadHold::Drop);
            }
            for &y in f.iter().filter(|_| mute_f) {
                s.hold_kind(Kind::Elect, y, x, end, LeadHold::Drop);
            }
        }
        *ro.borrow_mut() = Roles {
            a: Some(a),
            f,
            r,
            b: None,
        };
        false
    }));
    let won = s.check.won.len();
    let leader = s.leader();
    match (s.rand(3), leader) {
        (0, Some(l)) => {
            s.resign(l);
        }
        (1, Some(l)) => {
            let to = 1 + s.rand(u64::from(n)) as u16;
            s.yield_to(l, Some(to));
        }
        _ => {
            let x = 1 + s.rand(u64::from(n)) as u16;
            s.elect(x);
        }
    }
    let all: Vec<u16> = (1..=n).collect();
    let a = run_until_won(s, won, &all, 2 * hold).and(roles.borrow().a);
    let Some(a) = a else {
        s.on_elected = None;
        return;
    };
    let others: Vec<u16> = all.iter().copied().filter(|&x| x != a).collect();
    let resign = s.rand(2) == 0;
    let ro = Rc::clone(&roles);
    s.on_elected = Some(Box::new(move |s: &mut Sim, b: u16, _| {
        if b == a {
            return true;
        }
        let end = s.now + hold + s.rand(2 * hold);
        if !resign {
            let few = 1 + s.rand(q - 1) as usize;
            let reach = shuffled(s, (1..=n).filter(|&x| x != b).collect());
            for &x in reach.iter().skip(few) {
                s.hold_leads(b, x, end, LeadHold::Drop);
            }
            for x in (1..=n).filter(|&x| x != b) {
                s.hold_kind(Kind::Elect, b, x, end, LeadHold::Drop);
            }
        }
        ro.borrow_mut().b = Some(b);
        false
    }));
    let won = s.check.won.len();
    let b = run_until_won(s, won, &others, 2 * hold).and(roles.borrow().b);
    let Some(b) = b else {
        s.on_elected = None;
        return;
    };
    if s.hosts[usize::from(a) - 1]
        .node()
        .is_some_and(|x| x.leads().is_some())
    {
        s.stats.concurrent += 1;
    }
    // A hears the next round's claims (not B's LEADs), and its own reach the others.
    for &x in &others {
        s.hold_kind(Kind::Elect, x, a, s.now, LeadHold::Drop);
        s.hold_kind(Kind::Elect, a, x, s.now, LeadHold::Drop);
    }
    if resign {
        let t = s.now + hold;
        while s.now < t && s.leader() != Some(b) && s.check.violations.is_empty() {
            s.run_for(ms(1));
        }
        let d = s.rand(hbt);
        s.run_for(d);
        s.yield_to(b, Some(a));
    }
    let (f, r) = (roles.borrow().f.clone(), roles.borrow().r.clone());
    s.on_elected = Some(Box::new(move |s: &mut Sim, x: u16, _| {
        if x != a {
            return true;
        }
        let end = s.now + hold + s.rand(2 * hold);
        // Mostly just too few for a lease of their own with A: Q - 1 - |F|.
        let few = if s.rand(4) == 0 {
            1 + s.rand(q - 1) as usize
        } else {
            (q as usize - 1).saturating_sub(f.len()).max(1)
        };
        let g: Vec<u16> = shuffled(s, r.clone()).into_iter().take(few).collect();
        let mute = s.rand(2) == 0;
        for &y in &g {
            s.hold_leads(a, y, s.now, LeadHold::Drop);
        }
        for y in (1..=n).filter(|y| *y != a && !g.contains(y)) {
            s.hold_leads(a, y, end, LeadHold::Drop);
            if mute {
                s.hold_kind(Kind::Elect, a, y, end, LeadHold::Drop);
                for &z in &g {
                    s.hold_kind(Kind::Elect, z, y, end, LeadHold::Drop);
                }
            }
        }
        false
    }));
    let won = s.check.won.len();
    let again = run_until_won(s, won, &[a], hold);
    s.on_elected = None;
    if again.is_some() {
        s.stats.reelected_after += 1;
        s.run_for(hold);
    }
}

/// An adversary for the floor (issue 20): a round now (`elect` on a follower) re-elects
/// the sitting leader L while its lease is valid; from its re-election on, its new
/// term's LEADs reach only a few (none to Q-2), it hears nobody's LEADs, and half the
/// time nobody hears its claims, so its lease rests on the floor (the old term's lease)
/// and on too few new ACKs. Then, half the time, it yields to a random server while
/// the floor holds (a RESIGN of a term its old followers never followed).
fn floor_episode(s: &mut Sim, hold: Real) {
    let Some(l) = s.leader() else { return };
    let n = s.opts.n as u16;
    let q = u64::from(n) / 2 + 1;
    s.on_elected = Some(Box::new(move |s: &mut Sim, a: u16, _| {
        if a != l {
            return true;
        }
        let end = s.now + hold + s.rand(2 * hold);
        let few = s.rand(q - 1) as usize;
        let others = shuffled(s, (1..=n).filter(|&x| x != a).collect());
        let mute = s.rand(2) == 0;
        for &x in others.iter().skip(few) {
            s.hold_leads(a, x, end, LeadHold::Drop);
            if mute {
                s.hold_kind(Kind::Elect, a, x, end, LeadHold::Drop);
            }
        }
        for &x in &others {
            s.hold_kind(Kind::Lead, x, a, end, LeadHold::Drop);
        }
        false
    }));
    let won = s.check.won.len();
    let x = 1 + (l + s.rand(u64::from(n) - 1) as u16) % n;
    s.elect(x);
    let again = run_until_won(s, won, &[l], hold);
    s.on_elected = None;
    if again.is_none() {
        return;
    }
    s.stats.floors += 1;
    let d = s.rand(hold);
    s.run_for(d);
    if s.rand(2) == 0 {
        let to = 1 + s.rand(u64::from(n)) as u16;
        s.yield_to(l, Some(to));
    }
    s.run_for(hold);
}

// ----- issue 21: supervisors that stall ---------------------------------------------

/// Issue 21's share of a seed, drawn from a generator of its own.
#[derive(Clone, Debug, Default)]
struct StallPlan {
    on: bool,
    /// A stall follows a fault step with probability 1/every.
    every: u64,
}

/// A quarter of the seeds stall supervisors, after one step in two or six.
fn stall_plan(seed: u64) -> StallPlan {
    let mut r = electd::rng::SplitMix64::new(seed.wrapping_mul(0x94D0_49BB_1331_11EB) ^ 0x21);
    if hunting() {
        return StallPlan { on: true, every: 4 };
    }
    if r.below(4) != 0 {
        return StallPlan::default();
    }
    StallPlan {
        on: true,
        every: [2, 6][r.below(2) as usize],
    }
}

/// A supervisor stops for up to four holds (the leader's, half the time); then, half
/// the time, its leader hands over: `yield`, a crash, or a cut from the others (the
/// triggers of issue 21, item 2).
fn stall_fault(s: &mut Sim, id: u16, hold: Real) {
    let victim = s.leader().filter(|_| s.rand(2) == 0).unwrap_or(id);
    let d = 1 + s.rand(4 * hold);
    s.stall_supervisor(victim, d);
    if s.leader() != Some(victim) || s.rand(2) == 0 {
        return;
    }
    match s.rand(3) {
        0 => {
            s.resign(victim);
        }
        1 => {
            let at = s.now + s.rand(ms(5));
            let back = s.rand(hold);
            s.crash_at(victim, at, Some(back));
        }
        _ => s.isolate(victim),
    }
}

// ----- issue 11: health, drain, yield to, preempt-delay -----------------------------

/// Issue 11's share of a seed, drawn from its own generator so that the other seeds keep
/// their schedules (and the older negative controls their catching seeds).
#[derive(Clone, Debug, Default)]
struct HealthPlan {
    /// Health faults in the fault phase, and the health checks after it.
    on: bool,
    /// The health when the faults stop: 0 drawn per server, 1 every processor failed,
    /// 2 only the cut-off server healthy.
    end: u8,
    /// One server stays cut off from all others after the faults (n >= 3).
    isolate: bool,
    /// Health episodes on the quiet network after the first checks.
    episodes: u32,
}

/// Half the seeds have health faults; their daemons have checks (start unhealthy, rise
/// within a heartbeat or half a hold) in half of those, and preempt-delay (0, a few
/// heartbeats, or up to 1.5 s) in half.
fn health_plan(seed: u64, o: &mut Options) -> HealthPlan {
    let mut r = electd::rng::SplitMix64::new(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x11);
    if r.below(2) != 0 {
        return HealthPlan::default();
    }
    let hbt = o.heartbeat.as_nanos() as u64;
    o.checks = r.below(2) == 0;
    o.rise_max = [0, hbt, o.hold() / 2][r.below(3) as usize];
    o.preempt_delay = match r.below(4) {
        0 | 1 => None,
        2 => Some(Duration::ZERO),
        _ => Some(Duration::from_nanos(
            hbt * (1 + r.below(4)) + r.below(ms(1500)),
        )),
    };
    let cut = o.n >= 3;
    let end = match r.below(6) {
        0..=3 => 0,
        4 => 1,
        _ if cut => 2,
        _ => 1,
    };
    HealthPlan {
        on: true,
        end,
        isolate: end == 2 || (cut && r.below(3) == 0),
        episodes: 2 + r.below(3) as u32,
    }
}

/// The longest heartbeat now in force.
fn max_hbt(s: &Sim) -> Real {
    s.hosts
        .iter()
        .map(|h| h.timers.heartbeat.as_nanos() as u64)
        .max()
        .unwrap_or(0)
}

/// One health fault of the fault phase (only safety is checked while faults go on).
fn health_fault(s: &mut Sim, id: u16, hold: Real) {
    let n = s.opts.n as u16;
    let hbt = max_hbt(s);
    match s.rand(10) {
        // A check result now, either way.
        0 => {
            let v = !s.healthy(id);
            s.set_health(id, v);
        }
        // A check result aimed at a lease end, a faith end or a timer deadline.
        1 => {
            let who = s.leader().filter(|_| s.rand(2) == 0).unwrap_or(id);
            let v = s.rand(2) == 0;
            s.health_aimed(who, v);
        }
        // One shared fault: every processor fails within a hold.
        2 => {
            for x in 1..=n {
                let at = s.now + s.rand(hold);
                s.health_at(x, at, false);
            }
        }
        // A healthy server cut off from all others, the others failing half the time.
        3 => {
            s.set_health(id, true);
            s.isolate(id);
            s.stats.healthy_cut_off += 1;
            if s.rand(2) == 0 {
                for x in (1..=n).filter(|&x| x != id) {
                    s.set_health(x, false);
                }
            }
        }
        // Drain (the leader half of the time) or undrain.
        4 => {
            let who = s.leader().filter(|_| s.rand(2) == 0).unwrap_or(id);
            let v = !s.drained(who) && s.rand(4) != 0;
            s.drain(who, v);
        }
        // yield ID to a random target (unhealthy, drained, cut off, itself, unknown or
        // none, as it comes), then a check result 0-5 ms later, of either side.
        5 => {
            if let Some(l) = s.leader() {
                let to = match s.rand(6) {
                    0 => None,
                    1 => Some(l),
                    2 => Some(n + 1 + s.rand(3) as u16),
                    _ => Some(1 + s.rand(u64::from(n)) as u16),
                };
                s.yield_to(l, to);
                if s.rand(2) == 0 {
                    let who = to.filter(|&t| t <= n && s.rand(2) == 0).unwrap_or(l);
                    let at = s.now + s.rand(ms(5));
                    let v = s.rand(2) == 0;
                    s.health_at(who, at, v);
                }
            }
        }
        // Flapping: two to six results within two heartbeats.
        6 => {
            for _ in 0..2 + s.rand(5) {
                let at = s.now + s.rand(2 * hbt);
                let v = s.rand(2) == 0;
                s.health_at(id, at, v);
            }
        }
        // The leader's processor fails.
        7 => {
            if let Some(l) = s.leader() {
                s.set_health(l, false);
            }
        }
        // A round against the live leader (its re-election VOTEs in flight), and the
        // leader crashes and restarts at once 0-10 ms later: with checks it comes back
        // unhealthy, those VOTEs may elect it, and it hands over at once (its RESIGN
        // must wait for its quiet period: S2 across a restart).
        8 => {
            if let Some(l) = s.leader() {
                let f = 1 + s.rand(u64::from(n)) as u16;
                s.elect(f);
                let at = s.now + s.rand(ms(10));
                s.crash_at(l, at, Some(0));
            }
        }
        // Every processor recovers within a hold.
        _ => {
            for x in 1..=n {
                let at = s.now + s.rand(hold);
                s.health_at(x, at, true);
            }
        }
    }
}

/// When the faults stop: the health and drains of `hp.end`, and the server that stays
/// cut off, if any.
fn health_settle(s: &mut Sim, hp: &HealthPlan) -> Option<u16> {
    let n = s.opts.n as u16;
    let iso = hp.isolate.then(|| 1 + s.rand(u64::from(n)) as u16);
    for x in 1..=n {
        let (healthy, drained) = match hp.end {
            0 => (s.rand(4) != 0, s.rand(8) == 0),
            1 => (false, s.rand(4) == 0),
            _ => (Some(x) == iso, false),
        };
        s.set_health(x, healthy);
        s.drain(x, drained);
    }
    if let Some(i) = iso {
        s.isolate(i);
        if s.healthy(i) {
            s.stats.healthy_cut_off += 1;
        }
    }
    iso
}

/// What the health checks need to know about the quiet network.
struct Quiet {
    /// The servers that reach each other: all but the cut-off one.
    side: Vec<u16>,
    /// The cut-off server.
    iso: Option<u16>,
    /// SPEC 8's L1 bound plus one heartbeat (on the slowest clock, `slow_hbt`): the
    /// time a leader needs to hear a healthy follower's ACK before it hands over; the
    /// handover itself (the
    /// supervisor's wait, at most the lease, then a round) fits in L1, which allows
    /// 5*HBT for K*HBT of silence.
    bound: Real,
    /// How long a change of health takes to reach the leader: the next ACK, a
    /// heartbeat on the slowest clock (`slow_hbt`: counted at the nominal rate it
    /// fell short by HBT*rho/(1-rho), as P-after's `report_time` did), two delays, a
    /// write and a late timer.
    report: Real,
    /// How long after a server turns unfit it may still be elected: its last claim's
    /// delay, the VOTING window, writes, the VOTE's delay.
    elect: Real,
    hbt: Real,
    hold: Real,
}

impl Quiet {
    fn new(s: &Sim, iso: Option<u16>) -> Quiet {
        let n = s.opts.n as u16;
        let hbt = max_hbt(s);
        let rtt = s
            .hosts
            .iter()
            .map(|h| h.timers.rtt.as_nanos() as u64)
            .max()
            .unwrap_or(0);
        let d = s.opts.delay_max;
        let slack = 2 * s.opts.persist_max + s.opts.timer_slop + ms(1);
        Quiet {
            side: (1..=n).filter(|&x| Some(x) != iso).collect(),
            iso,
            bound: l1_bound(s) + slow_hbt(s),
            report: slow_hbt(s) + 2 * d + slack,
            elect: rtt + 2 * d + slack,
            hbt,
            hold: max_hold(s),
        }
    }

    /// The servers on the majority side that could lead now: fit, and settled (their
    /// daemon's check has risen and its startup quiet period is over).
    fn fit(&self, s: &Sim) -> Vec<u16> {
        self.side
            .iter()
            .copied()
            .filter(|&x| s.settled(x) && s.fit(x))
            .collect()
    }

    /// The lease holder on the majority side, if exactly one server holds a lease.
    fn leader(&self, s: &Sim) -> Option<u16> {
        s.leader().filter(|l| self.side.contains(l))
    }
}

/// The servers of the majority side that may be elected as a last resort now (SPEC
/// 13): settled (their checks have had time to rise: `rise_max` is at most half the
/// quiet period), unhealthy, undrained, not witnesses.
fn last_resorts(s: &Sim, q: &Quiet) -> Vec<u16> {
    q.side
        .iter()
        .copied()
        .filter(|&x| {
            s.settled(x) && !s.healthy(x) && !s.drained(x) && !s.opts.witnesses.contains(&x)
        })
        .collect()
}

fn priority(s: &Sim, id: u16) -> u8 {
    s.opts
        .priorities
        .iter()
        .find(|p| p.0 == id)
        .map_or(0, |p| p.1)
}

/// The successor a handover or a round picks among `c`: the highest priority, then the
/// smallest id (every claim on the same last term).
fn best(s: &Sim, c: &[u16]) -> Option<u16> {
    c.iter()
        .copied()
        .max_by_key(|&x| (priority(s, x), std::cmp::Reverse(x)))
}

/// The health checks once health has been stable since at least `q.report` before `t0`
/// (the liveness condition of issue 11, exactly what the design can promise):
///
/// - H-fit: if some server on the majority side is fit (healthy, undrained, not a
///   witness; it reaches a majority since the side is one), a fit server holds a lease
///   within `q.bound` of `t0`. An unfit leader hands over only once it knows a fit
///   server, which takes the fit server's next ACK; a healthy server cut off from the
///   others is never known fit and could not be elected (heard count below Q).
/// - H-stay (with `stay`): if nobody on the majority side is fit, a leader holding a
///   lease at `t0` keeps it without a gap until `t1`: an unfit leader stays while no
///   fit server is known, so health alone leaves no leaderless period. (A leader that
///   hands over to a server that fails before its round is followed by a last resort,
///   after a gap: a_shared_fault_never_leaves_the_cluster_leaderless in
///   tests/health_sim.rs; so this check starts only once every report is current.)
/// - H-elect: from `t0 + q.elect`, only fit servers are elected; when none is, only
///   a last resort (unhealthy, undrained, no witness: SPEC 13).
/// - H-last (with `stay`): if nobody on the majority side is fit but some server may be
///   a last resort, some server leads within `q.bound` of `t0` and still does at `t1`.
///
/// Runs the simulator to `t1` (at least `t0 + q.bound`).
fn check_health(
    s: &mut Sim,
    q: &Quiet,
    t0: Real,
    t1: Real,
    stay: bool,
    tag: &str,
) -> Option<String> {
    // Everything is judged from t0: the fit servers, the leader that must stay.
    s.run_until(t0);
    let fit = q.fit(s);
    let lr = if fit.is_empty() {
        last_resorts(s, q)
    } else {
        Vec::new()
    };
    let holder = if stay && fit.is_empty() {
        q.leader(s)
    } else {
        None
    };
    let t1 = t1.max(t0 + q.bound);
    let won_before = s.check.won.len();
    s.run_until(t1);
    if !s.check.violations.is_empty() {
        return None;
    }
    if !fit.is_empty() {
        match s.check.first_lease_by(t0, |x| fit.contains(&x)) {
            Some((_, at)) if at <= t0 + q.bound => {}
            other => {
                return Some(format!(
                    "H-fit ({tag}): no fit server leads within {} ms of {} ms (fit {fit:?}, \
                     first {other:?}, leaders {:?})",
                    q.bound / ms(1),
                    t0 / ms(1),
                    s.leaders()
                ));
            }
        }
    }
    if stay && fit.is_empty() && (!lr.is_empty() || holder.is_some()) {
        let first = s.check.first_lease_by(t0, |x| q.side.contains(&x));
        if first.is_none_or(|(_, at)| at > t0 + q.bound) || q.leader(s).is_none() {
            return Some(format!(
                "H-last ({tag}): nobody fit, last resorts {lr:?}, yet no leader within {} ms of \
                 {} ms or at {} ms (first {first:?}, leaders {:?})",
                q.bound / ms(1),
                t0 / ms(1),
                t1 / ms(1),
                s.leaders()
            ));
        }
    }
    if let Some(l) = holder {
        if !s.check.lease_covers(l, t0, t1) {
            return Some(format!(
                "H-stay ({tag}): nobody fit, yet leader {l} lost its lease between {} and {} ms",
                t0 / ms(1),
                t1 / ms(1)
            ));
        }
    }
    // A sitting leader re-elected in a higher term keeps its seat, fit or not (it
    // claims eligible while it leads, so that a server whose term ran ahead can be
    // brought back): not an election of an unfit server.
    let sitting = |w: &(Real, u16, u64)| {
        s.check
            .intervals
            .iter()
            .any(|i| i.holder == w.1 && i.start < w.0 && i.end >= w.0)
    };
    let late = s.check.won[won_before..]
        .iter()
        .find(|w| w.0 >= t0 + q.elect && !fit.contains(&w.1) && !lr.contains(&w.1) && !sitting(w));
    if let Some(w) = late {
        return Some(format!(
            "H-elect ({tag}): {} elected in term {} at {} ms though unfit (fit {fit:?}, last \
             resorts {lr:?})",
            w.1,
            w.2,
            w.0 / ms(1)
        ));
    }
    None
}

/// Waits up to `limit` for a lease holder on the majority side.
fn side_leader(s: &mut Sim, q: &Quiet, limit: Real) -> Option<u16> {
    let end = s.now + limit;
    while s.now < end && s.check.violations.is_empty() {
        if let Some(l) = q.leader(s) {
            return Some(l);
        }
        s.run_for(ms(5));
    }
    q.leader(s)
}

/// After the faults: the first health checks, then `hp.episodes` episodes on the quiet
/// network, each with its own check, then the end state. Returns the first failure.
fn health_epilogue(s: &mut Sim, hp: &HealthPlan, iso: Option<u16>, t0: Real) -> Option<String> {
    // One-way delays within a quarter of the final RTT (the stable network's bound was
    // set from the first timers, and a rolling reload may have shortened RTT): an
    // unhealthy or drained leader waits RTT for its followers' answers before naming a
    // successor, and the episodes check that it names the best one.
    let rtt = s
        .hosts
        .iter()
        .map(|h| h.timers.rtt.as_nanos() as u64)
        .min()
        .unwrap_or(0);
    s.opts.delay_max = s.opts.delay_max.min(rtt / 4).max(s.opts.delay_min);
    let q = Quiet::new(s, iso);
    let t1 = t0 + q.bound + ms(1000);
    if let Some(f) = check_health(s, &q, t0, t1, true, "after the faults") {
        return Some(f);
    }
    for e in 0..hp.episodes {
        if !s.check.violations.is_empty() {
            return None;
        }
        let tag = format!("episode {e}");
        // An episode may have restarted a server: wait until every daemon is settled.
        let t = s.settle_time();
        s.run_until(t);
        let f = match s.rand(6) {
            0 => episode_all_down(s, &q, &tag),
            1 => episode_yield_to(s, &q, &tag),
            2 => episode_preempt(s, &q, &tag),
            3 => episode_drain(s, &q, &tag),
            _ => episode_flap(s, &q, &tag),
        };
        if f.is_some() {
            return f;
        }
    }
    // The end: everybody on the majority side healthy half the time, else as it is.
    if s.rand(2) == 0 {
        for &x in &q.side {
            s.set_health(x, true);
            s.drain(x, false);
        }
    }
    let t = (s.now + q.report).max(s.settle_time());
    let delay = s.opts.preempt_delay.map_or(0, |d| d.as_nanos() as u64);
    let end = t + 2 * q.bound + delay + delay / 10 + ms(2000);
    if let Some(f) = check_health(s, &q, t, end, true, "end") {
        return Some(f);
    }
    let fit = q.fit(s);
    if fit.is_empty() {
        return None;
    }
    let leaders = s.leaders();
    let agree = q.side.iter().all(|&x| {
        s.status(x)
            .is_some_and(|st| st.leader == leaders.first().copied())
    });
    let l = match leaders[..] {
        [l] if fit.contains(&l) && agree => l,
        _ => {
            let views: Vec<String> = (1..=s.opts.n as u16)
                .map(|id| match s.status(id) {
                    Some(st) => format!("{id}:{}/t{}/l{:?}", st.role.name(), st.term, st.leader),
                    None => format!("{id}:down"),
                })
                .collect();
            return Some(format!(
                "H-end: leaders {leaders:?}, fit {fit:?}, views {}",
                views.join(" ")
            ));
        }
    };
    let top = fit.iter().map(|&x| priority(s, x)).max().unwrap_or(0);
    if s.opts.preempt_delay.is_some() && priority(s, l) != top {
        return Some(format!(
            "H-preempt (end): leader {l} of priority {} below {top}, fit {fit:?}",
            priority(s, l)
        ));
    }
    None
}

/// Every other processor fails (or its server is drained), then the leader's own
/// flaps, at moments aimed at lease and timer ends: the leader keeps its lease without
/// a gap and nobody is elected (H-stay). Then one server recovers, without a restart:
/// it leads within the bound (handed the seat, or keeping it).
fn episode_all_down(s: &mut Sim, q: &Quiet, tag: &str) -> Option<String> {
    let Some(l) = side_leader(s, q, q.bound) else {
        return episode_flap(s, q, tag);
    };
    let n = s.opts.n as u16;
    let mut last = s.now;
    for x in (1..=n).filter(|&x| x != l) {
        if s.rand(4) == 0 {
            s.drain(x, true);
        } else {
            let at = s.now + s.rand(q.hbt);
            last = last.max(at);
            s.health_at(x, at, false);
        }
    }
    // Once the leader has heard every other server unfit (an unfit leader may have
    // handed over meanwhile, to a server that was still fit), the leader of that moment
    // must stay, whatever its own health does.
    s.run_until(last + q.report);
    let l = q.leader(s)?;
    let e0 = s.now;
    for k in 0..2 + s.rand(5) {
        let v = k % 2 == 1;
        let aimed = if s.rand(2) == 0 {
            s.health_aimed(l, v)
        } else {
            None
        };
        let at = aimed.unwrap_or_else(|| {
            let at = s.now + s.rand(q.hold);
            s.health_at(l, at, v);
            at
        });
        s.run_until(at);
        let d = s.rand(q.hbt);
        s.run_for(d);
    }
    if s.rand(3) != 0 {
        s.set_health(l, false);
    }
    let e1 = s.now + 2 * q.hold;
    s.run_until(e1);
    if !s.check.violations.is_empty() {
        return None;
    }
    if !s.check.lease_covers(l, e0, e1) {
        return Some(format!(
            "H-stay ({tag}): every other server unfit, yet leader {l} lost its lease between \
             {} and {} ms",
            e0 / ms(1),
            e1 / ms(1)
        ));
    }
    // The leader may be re-elected in a higher term (while healthy, a round that a
    // straggler opens re-elects the live leader): that keeps the seat.
    if let Some(w) = s.check.won.iter().find(|w| w.0 > e0 && w.1 != l) {
        return Some(format!(
            "H-stay ({tag}): {w:?} elected while nobody else was fit"
        ));
    }
    // H-last (SPEC 13, issue 22): in the even seeds the leader then crashes while
    // nobody else is fit. A last resort (an unhealthy, undrained server of the side)
    // leads within the bound; before, nobody led until a check passed. The leader comes
    // back (unhealthy) and settles before the recovery below.
    let quorum = s.opts.n / 2 + 1;
    if s.opts.seed % 2 == 0 && q.side.len() > quorum {
        let lr: Vec<u16> = last_resorts(s, q).into_iter().filter(|&x| x != l).collect();
        s.crash(l);
        let t = s.now;
        s.run_until(t + q.bound);
        if !s.check.violations.is_empty() {
            return None;
        }
        if !lr.is_empty() {
            match s.check.first_lease_by(t, |x| lr.contains(&x)) {
                Some((_, at)) if at <= t + q.bound => {}
                other => {
                    return Some(format!(
                        "H-last ({tag}): leader {l} crashed at {} ms, nobody fit; no last resort \
                         of {lr:?} led within {} ms (first {other:?}, leaders {:?})",
                        t / ms(1),
                        q.bound / ms(1),
                        s.leaders()
                    ));
                }
            }
        }
        s.restart(l);
        s.set_health(l, false);
        let settled = s.settle_time();
        s.run_until(settled.max(s.now) + q.report);
    }
    // Recovery without a restart: a server of the majority side (maybe the leader)
    // turns healthy; a fit server leads within the bound, and it is that one unless the
    // leader is fit itself.
    let cands: Vec<u16> = q
        .side
        .iter()
        .copied()
        .filter(|&x| !s.opts.witnesses.contains(&x))
        .collect();
    let r = cands[s.rand(cands.len() as u64) as usize];
    s.drain(r, false);
    s.set_health(r, true);
    let t = s.now;
    let fit = q.fit(s);
    s.run_until(t + q.bound);
    match s.check.first_lease_by(t, |x| fit.contains(&x)) {
        Some((x, at)) if at <= t + q.bound && (x == r || x == l) => None,
        other => Some(format!(
            "H-fit ({tag}): {r} recovered at {} ms (leader {l}, fit {fit:?}), no fit leader \
             within {} ms (first {other:?}, leaders {:?})",
            t / ms(1),
            q.bound / ms(1),
            s.leaders()
        )),
    }
}

/// Every server's processor changes one to four times within two holds, some changes
/// aimed at lease and timer ends, and some servers are drained or undrained; then the
/// checks of `check_health` from the last change.
fn episode_flap(s: &mut Sim, q: &Quiet, tag: &str) -> Option<String> {
    let n = s.opts.n as u16;
    let mut last = s.now;
    for x in 1..=n {
        if s.rand(6) == 0 {
            let v = !s.drained(x);
            s.drain(x, v);
        }
        let k = 1 + s.rand(4);
        for i in 0..k {
            let v = if i == k - 1 {
                s.rand(4) != 0
            } else {
                s.rand(2) == 0
            };
            let aimed = if s.rand(3) == 0 {
                s.health_aimed(x, v)
            } else {
                None
            };
            let at = aimed.unwrap_or_else(|| {
                let at = s.now + s.rand(2 * q.hold);
                s.health_at(x, at, v);
                at
            });
            last = last.max(at);
        }
    }
    // Changes scheduled at one instant land in an order the seed fixes; the last
    // scheduled for each server is the final one only if its instant is the latest.
    s.run_until(last + 1);
    let t = s.now + q.report;
    s.run_until(t);
    check_health(s, q, t, t + q.bound, false, tag)
}

/// `yield ID` with the supervisor confirming at once: the RESIGN names the target,
/// and the next leader is the target if it is fit and on the majority side, otherwise
/// the usual choice by priority then id among the fit others (H-yield).
fn episode_yield_to(s: &mut Sim, q: &Quiet, tag: &str) -> Option<String> {
    let Some(l) = side_leader(s, q, q.bound) else {
        return episode_flap(s, q, tag);
    };
    s.run_for(q.report);
    if q.leader(s) != Some(l) {
        return None;
    }
    let fit = q.fit(s);
    let unfit: Vec<u16> = q
        .side
        .iter()
        .copied()
        .filter(|x| !fit.contains(x))
        .collect();
    let others: Vec<u16> = fit.iter().copied().filter(|&x| x != l).collect();
    let pick = |s: &mut Sim, v: &[u16]| (!v.is_empty()).then(|| v[s.rand(v.len() as u64) as usize]);
    let to = match s.rand(6) {
        0 | 1 => pick(s, &others),
        2 => pick(s, &unfit),
        3 => q.iso,
        4 => Some(l),
        _ => None,
    };
    // The usual choice is exact only if every fit server follows this leader (same
    // last term in every claim).
    let exact = fit
        .iter()
        .all(|&x| s.status(x).is_some_and(|st| st.leader == Some(l)));
    // Nobody fit: a last resort, in the round after the one the RESIGN opened (the
    // resigner among the candidates again), if every candidate follows this leader.
    let lr = last_resorts(s, q);
    let exact = exact
        && lr
            .iter()
            .all(|&x| s.status(x).is_some_and(|st| st.leader == Some(l)));
    let expected = match to {
        Some(t) if others.contains(&t) => Some(t),
        _ => best(s, &others)
            .or(fit.contains(&l).then_some(l))
            .or_else(|| best(s, &lr)),
    };
    let (cm, hung) = (s.opts.confirm_max, s.opts.confirm_hung_pm);
    s.opts.confirm_max = cm.min(ms(1));
    s.opts.confirm_hung_pm = 0;
    let ok = s.yield_to(l, to);
    s.opts.confirm_max = cm;
    s.opts.confirm_hung_pm = hung;
    if !ok {
        return None;
    }
    let t = s.now;
    s.run_until(t + q.bound);
    if !s.check.violations.is_empty() || !exact {
        return None;
    }
    // The first election after the yield (not the first lease: with preempt-delay 0
    // the successor hands on to a server of higher priority the moment its lease forms,
    // before it reports one).
    let first = s.check.won.iter().find(|w| w.0 > t).map(|w| (w.1, w.0));
    match (expected, first) {
        (Some(e), Some((x, at))) if x == e && at <= t + q.bound => None,
        (None, None) => None,
        _ => Some(format!(
            "H-yield ({tag}): {l} yielded to {to:?} at {} ms; expected {expected:?}, first \
             election {first:?} (fit {fit:?}, priorities {:?})",
            t / ms(1),
            s.opts.priorities
        )),
    }
}

/// preempt-delay: a server of higher priority than the leader's, unfit until now
/// (and restarted half of the time), turns fit. The leader hands it the seat no sooner
/// than the delay after it turned fit, by a RESIGN naming it, and it never wins a round
/// before that RESIGN (H-preempt).
fn episode_preempt(s: &mut Sim, q: &Quiet, tag: &str) -> Option<String> {
    let Some(delay) = s.opts.preempt_delay else {
        return episode_flap(s, q, tag);
    };
    let Some(l) = side_leader(s, q, q.bound) else {
        return episode_flap(s, q, tag);
    };
    let mine = priority(s, l);
    let higher: Vec<u16> = q
        .side
        .iter()
        .copied()
        .filter(|&x| priority(s, x) > mine && !s.opts.witnesses.contains(&x))
        .collect();
    if higher.is_empty() || !s.fit(l) {
        return episode_flap(s, q, tag);
    }
    // Every higher server unfit, then one of them comes back.
    for &x in &higher {
        s.set_health(x, false);
    }
    s.run_for(q.report + q.hold);
    if q.leader(s) != Some(l) {
        return None;
    }
    let p = higher[s.rand(higher.len() as u64) as usize];
    let mut extra = 0;
    // A restart, if the others still make a majority with the leader (else the leader
    // loses its lease, and a round may rightly choose the preferred server).
    let quorum = s.opts.n / 2 + 1;
    if q.side.len() > quorum && s.rand(2) == 0 {
        // Its quiet period (max(K*HBT, the hold promise on disk): it reports UNFIT
        // until then), its check's rise, and a heartbeat for its first fit ACK.
        let promise = ms(u64::from(s.hosts[usize::from(p) - 1].disk.hold_ms));
        extra = q.hold.max(promise) + s.opts.rise_max + q.hbt;
        s.crash(p);
        let d = s.rand(q.hold);
        s.run_for(d);
        s.restart(p);
    }
    s.drain(p, false);
    let e1 = s.now;
    s.set_health(p, true);
    let won_before = s.check.won.len();
    let d = delay.as_nanos() as u64;
    let rho = f64::from(s.opts.drift_ppm) / 1e6;
    let earliest = e1 + (d as f64 * (1.0 - rho)) as u64;
    let latest = e1 + extra + (d as f64 * (1.0 + 2.0 * rho)) as u64 + q.report + q.bound;
    s.run_until(latest + ms(1));
    if !s.check.violations.is_empty() {
        return None;
    }
    let h = s
        .check
        .handoffs
        .iter()
        .find(|h| h.at >= e1 && h.reason == electd::node::Handover::Preempt)
        .copied();
    let won: Vec<_> = s.check.won[won_before..]
        .iter()
        .filter(|w| w.1 == p)
        .copied()
        .collect();
    let fail = match h {
        None => Some("no preemption".to_string()),
        Some(h) if h.from != l || h.to != Some(p) => Some(format!("wrong handover {h:?}")),
        Some(h) if h.at < earliest => Some(format!(
            "handed over {} ms after it turned fit, delay {} ms",
            (h.at - e1) / ms(1),
            d / ms(1)
        )),
        Some(h) if won.iter().any(|w| h.sent.is_none_or(|sent| w.0 < sent)) => Some(format!(
            "{p} won a round by itself: {won:?}, handover {h:?}"
        )),
        Some(_) if s.check.first_lease_by(e1, |x| x == p).is_none() => {
            Some(format!("{p} never led"))
        }
        Some(_) => None,
    };
    fail.map(|f| {
        format!(
            "H-preempt ({tag}): leader {l}, preferred {p} fit at {} ms: {f}",
            e1 / ms(1)
        )
    })
}

/// The leader is drained: it hands over to the best fit server (priority, then id), or
/// keeps its seat while nobody is fit (H-drain); the drain survives a restart.
fn episode_drain(s: &mut Sim, q: &Quiet, tag: &str) -> Option<String> {
    let Some(l) = side_leader(s, q, q.bound) else {
        return episode_flap(s, q, tag);
    };
    s.run_for(q.report);
    if q.leader(s) != Some(l) {
        return None;
    }
    let fit = q.fit(s);
    let exact = fit
        .iter()
        .all(|&x| s.status(x).is_some_and(|st| st.leader == Some(l)));
    let others: Vec<u16> = fit.iter().copied().filter(|&x| x != l).collect();
    let t = s.now;
    s.drain(l, true);
    s.run_until(t + q.bound);
    if !s.check.violations.is_empty() {
        return None;
    }
    let fail = match best(s, &others) {
        Some(e) if exact => match s.check.won.iter().find(|w| w.0 > t) {
            Some(w) if w.1 == e && w.0 <= t + q.bound => None,
            other => Some(format!("expected {e} to be elected, first {other:?}")),
        },
        Some(_) => None,
        None if s.check.lease_covers(l, t, s.now) => None,
        None => Some("nobody fit, yet the drained leader lost its seat".into()),
    };
    if let Some(f) = fail {
        return Some(format!(
            "H-drain ({tag}): {l} drained at {} ms: {f}",
            t / ms(1)
        ));
    }
    if !others.is_empty() && s.rand(2) == 0 {
        // On disk by now; a restart keeps it.
        s.crash(l);
        s.restart(l);
        if !s.drained(l) {
            return Some(format!("H-drain ({tag}): {l} lost its drain in a restart"));
        }
        s.run_for(q.hold);
    }
    if s.rand(2) == 0 {
        s.drain(l, false);
    }
    None
}

// ----- a drain on a stalled state disk (L-drain) --------------------------------------

/// How long a drained leader's planned handover takes on the quiet network, in real
/// time (SPEC 7, graceful failover; SPEC 14, "RTT plus a few one-way delays plus the
/// local processor's stop time"): up to RTT for its followers' answers to the LEAD
/// that says it is unfit, its supervisor's confirmation, the RESIGN's delay, the
/// round (at most the VOTING window, RTT), a vote's write, the VOTE's delay, the new
/// term's write, its LEAD and the ACKs that make the lease, with a late timer at each
/// step. Each RTT is counted a tenth longer, for a clock slow by up to rho (at most
/// 5 %), and 1 ms is added. With the timers the swarm draws this is about a heartbeat
/// (RTT is at most a quarter of it, plus 1 ms; each delay at most RTT/4; the
/// confirmation at most a tenth of it, see `drain_stall_episode`), where the hold is
/// at least two: a handover that waits for the lease to lapse (a hold after the last
/// LEAD the followers took, then a round) comes after (K-1)*HBT at the earliest.
fn drain_bound(s: &Sim) -> Real {
    let rtt = s
        .hosts
        .iter()
        .map(|h| h.timers.rtt.as_nanos() as u64)
        .max()
        .unwrap_or(0);
    let rtt = rtt + rtt / 10;
    2 * rtt
        + s.opts.confirm_max
        + 6 * s.opts.delay_max
        + 4 * s.opts.persist_max
        + 4 * s.opts.timer_slop
        + ms(1)
}

/// The quiet shape L-drain and L-reload run on: one-way delays within a quarter of the
/// shortest RTT (L-rest's reload may have fixed every delay at RTT/2: no longer), no
/// supervisor that hangs; then every daemon settled and every fitness report current.
/// False if a violation stopped the run meanwhile.
fn quiet_and_settled(s: &mut Sim) -> bool {
    let rtt_min = s
        .hosts
        .iter()
        .map(|h| h.timers.rtt.as_nanos() as u64)
        .min()
        .unwrap_or(0);
    s.opts.delay_min = s.opts.delay_min.min(rtt_min / 4);
    s.opts.delay_max = s.opts.delay_max.min(rtt_min / 4).max(s.opts.delay_min);
    s.opts.confirm_hung_pm = 0;
    let t = s.settle_time().max(s.now) + report_time(s);
    s.run_until(t);
    s.check.violations.is_empty()
}

/// L-drain (docs/PROTOCOL.md, "Durable state"; SPEC sections 4, 13): a sitting leader
/// is drained while its state disk stalls (`Sim::stall_disk`): the stall begins up to
/// a heartbeat before the drain, at it, or just after it (within two writes' time,
/// while the drain's write may still be in flight and keeps its time), and lasts the
/// bound plus one to two holds. The drain's write changes only the drain, which no
/// datagram promises, so the leader's LEADs go on: it hears who is fit and hands over
/// as planned. Checked: the first election after the drain is won by the most
/// preferred fit server (group 0's priority, then the smallest id: the successor a
/// drained leader names, as H-drain judges), and that server holds a lease within
/// `drain_bound` of the drain, while the disk is still stalled. With a drain's write
/// holding every later datagram (`Sabotage::drain_write_holds_sends`, the old rule) the
/// heartbeats stop with the disk and the seat moves only once the lease has lapsed.
///
/// The shape is restricted so that both checks are sound in every seed that runs it:
/// - on the quiet network after every other check (every link healed but for a server
///   left cut off in the health seeds, no loss, one set of timers), with one-way delays
///   within a quarter of the shortest RTT, as in the health episodes: the leader waits
///   RTT for its followers' answers before naming its successor, and a longer round
///   trip could leave the preferred server's answer out;
/// - the servers that reach each other, the drained leader left out, are a majority:
///   its vote and its ACKs wait for its disk, so the others must elect and acknowledge
///   the successor without it (no episode with one or two servers, or with a partition:
///   a minority side cannot elect, and a majority side of exactly Q cannot without
///   the stalled leader);
/// - the leader is fit and followed by every server that reaches it, every fitness
///   report is current (health settled, then `report_time`), and some other server
///   is fit (else the drained leader rightly keeps its seat: H-drain checks that);
/// - with preempt-delay, no fit server is preferred to the leader (a preemption that
///   may be under way would choose the successor on other grounds);
/// - the supervisors confirm a planned stop within a tenth of a heartbeat and never
///   hang: a hung supervisor holds the RESIGN until the lease ends by design (SPEC 6),
///   which would make a handover no faster than a lapse and tell nothing of the disk.
///
/// After the check it runs on past the stall's end by a hold, so that the safety
/// checks see the datagrams the disk held (a vote, ACKs) leave late. It runs last, in
/// every seed whose shape allows it (6,403 of the 10,000 default seeds), and draws from
/// the run's generator only then, so no other check or schedule moves; it adds 1.8 %
/// to the swarm's events (half the seeds, tried first, caught the old rule half as
/// often for 0.9 %).
/// Returns the first failure; records the shape and the handover's time in `out`.
fn drain_stall_episode(s: &mut Sim, iso: Option<u16>, out: &mut Outcome) -> Option<String> {
    let n = s.opts.n as u16;
    let side: Vec<u16> = (1..=n).filter(|&x| Some(x) != iso).collect();
    if side.len() <= s.opts.n / 2 + 1 {
        return None;
    }
    s.opts.confirm_max = s.opts.confirm_max.min(max_hbt(s) / 10);
    s.opts.confirm_min = s.opts.confirm_min.min(s.opts.confirm_max);
    if !quiet_and_settled(s) {
        return None;
    }
    let l = s.leader().filter(|l| side.contains(l) && s.fit(*l))?;
    let pr = |s: &Sim, x: u16| s.opts.priority(0, x);
    let fit: Vec<u16> = side
        .iter()
        .copied()
        .filter(|&x| x != l && s.settled(x) && s.fit(x))
        .collect();
    let follows = side
        .iter()
        .all(|&x| s.status(x).is_some_and(|st| st.leader == Some(l)));
    let preempt = s.opts.preempt_delay.is_some() && fit.iter().any(|&x| pr(s, x) > pr(s, l));
    if !follows || preempt {
        return None;
    }
    let want = fit
        .iter()
        .copied()
        .max_by_key(|&x| (pr(s, x), std::cmp::Reverse(x)))?;
    let bound = drain_bound(s);
    let hold = max_hold(s);
    let stall = bound + hold + s.rand(hold + 1);
    let shape = s.rand(3) as u8;
    let mut stall_end = s.now + stall;
    if shape == 0 {
        let ahead = 1 + s.rand(max_hbt(s));
        s.stall_disk(l, ahead + stall);
        stall_end += ahead;
        s.run_for(ahead);
        if s.leader() != Some(l) {
            return Some(format!(
                "L-drain: leader {l} lost its lease on a stalled disk before its drain \
                 (stalled {} ms before {} ms, leaders {:?})",
                ahead / ms(1),
                s.now / ms(1),
                s.leaders()
            ));
        }
    } else if shape == 1 {
        s.stall_disk(l, stall);
    }
    let t = s.now;
    if !s.drain(l, true) {
        return None;
    }
    if shape == 2 {
        let after = s.rand(2 * s.opts.persist_max + 1);
        s.run_for(after);
        s.stall_disk(l, stall);
        stall_end = s.now + stall;
    }
    s.run_until(stall_end + hold);
    if !s.check.violations.is_empty() {
        return None;
    }
    let won = s.check.won.iter().find(|w| w.0 > t).copied();
    let lease = s.check.first_lease_by(t, |x| x != l);
    let took = lease.map(|(_, at)| at - t);
    out.drain_stall = Some((
        shape,
        took.map_or(f64::INFINITY, |d| d as f64 / 1e6),
        bound as f64 / 1e6,
    ));
    let fine = matches!((won, lease), (Some(w), Some((who, at)))
        if w.1 == want && who == want && at <= t + bound && at < stall_end);
    if fine {
        return None;
    }
    let when = ["before", "at", "just after"][usize::from(shape)];
    Some(format!(
        "L-drain: leader {l} drained at {} ms, its disk stalled {when} it until {} ms: \
         expected {want} (fit {fit:?}) to lead within {} ms; first election {won:?}, \
         first lease of another {lease:?} ({:?} ms after the drain; hold {} ms)",
        t / ms(1),
        stall_end / ms(1),
        bound / ms(1),
        took.map(|d| d / ms(1)),
        hold / ms(1)
    ))
}

// ----- a reload on a stalled state disk (L-reload) --------------------------------------

/// L-reload (docs/PROTOCOL.md, "Durable state"; SPEC sections 4, 11): a sitting
/// leader's state disk stalls, and every server is reloaded in one of the sequences of
/// `ReloadShape` (each step within a heartbeat; every longer heartbeat 1.5 to 3 times
/// the longest in force, with the longest K and RTT: a longer hold than any in force).
/// A LEAD may carry a longer hold only once it is on disk, so the leader keeps its
/// running timers and the hold on its disk until the write lands (`Node::set_timers`),
/// a write that only lowers its promise (a reload back) holds nothing, and staged
/// timers are measured against the lowest hold that may land (`min_hold_pending`): it
/// keeps its lease. Checked: the leader's leases cover the time from the stall to its
/// end without a gap, and nobody is elected meanwhile; within two writes' time of the
/// thaw the last reload's heartbeat is in force on it. Each rule has its control:
/// `Sabotage::reload_holds_sends` (any sequence), `Sabotage::lowering_write_holds`
/// (the sequences that reload back) and `Sabotage::disk_hold_bound` (D1): the
/// heartbeats wait for the disk and the lease lapses within the stall.
///
/// The shape, so that the checks are sound in every seed that runs it: one group (a
/// group's balance could move it), on the quiet network after every other check (the
/// leader reached by a majority: an isolated server in the health seeds stays out of
/// it), one-way delays within RTT/4, the leader fit and followed by every server that
/// reaches it, no fit server preferred to it when preempt-delay is set, and no
/// supervisor that hangs. A reload back to shorter timers is sound here: the
/// simulator's supervisors announce no grace, so no reload is refused
/// (`Sim::reload`), a follower's faith comes from the holds of the LEADs it took,
/// which no reload shortens, and the leader's LEADs carry a hold on its disk
/// throughout. D1's first step, with the disk working, is checked too
/// (`reload_before_stall`). Runs last, after L-drain (drawing from the run's generator
/// only then, so nothing else moves).
fn reload_stall_episode(s: &mut Sim, iso: Option<u16>, out: &mut Outcome) -> Option<String> {
    let n = s.opts.n as u16;
    if s.opts.groups > 1 {
        return None;
    }
    let side: Vec<u16> = (1..=n).filter(|&x| Some(x) != iso).collect();
    if side.len() <= s.opts.n / 2 {
        return None;
    }
    if !quiet_and_settled(s) {
        return None;
    }
    let all_run = side.iter().all(|&x| s.is_up(x) && !s.is_paused(x));
    let l = s
        .leader()
        .filter(|l| all_run && side.contains(l) && s.fit(*l))?;
    let pr = |s: &Sim, x: u16| s.opts.priority(0, x);
    let follows = side
        .iter()
        .all(|&x| s.status(x).is_some_and(|st| st.leader == Some(l)));
    let preempt = s.opts.preempt_delay.is_some()
        && side
            .iter()
            .any(|&x| x != l && s.fit(x) && pr(s, x) > pr(s, l));
    if !follows || preempt {
        return None;
    }
    let plan = reload_plan(s)?;
    let hbt = max_hbt(s);
    if let Some(before) = plan.before_stall
        && let Err(found) = reload_before_stall(s, l, &side, before)
    {
        return found;
    }
    let last = plan.phases.last().map(|p| p.1[usize::from(l) - 1])?;
    let hold = last.hold();
    let t0 = s.now;
    let won = s.check.won.len();
    s.stall_disk(l, plan.stall);
    let stall_end = t0 + plan.stall;
    for (off, to) in &plan.phases {
        reload_every(s, t0 + off, hbt, to);
    }
    s.run_until(stall_end);
    if !s.check.violations.is_empty() {
        return None;
    }
    let shape = plan.shape;
    let covered = s.checks(0).lease_covers(l, t0, stall_end);
    let elected = s.check.won[won..].first().copied();
    if !covered || elected.is_some() {
        let reach = s.checks(0).lease_reach(l, t0, stall_end);
        return Some(format!(
            "L-reload: leader {l}'s disk stalled at {} ms until {} ms, every server reloaded \
             ({shape:?}: {}) within {} ms of each step: its lease reached only {} ms; \
             elected since: {elected:?}",
            t0 / ms(1),
            stall_end / ms(1),
            plan.steps(l),
            hbt / ms(1),
            reach / ms(1)
        ));
    }
    // The new timers come into force once the writes land after the thaw: the one in
    // flight lands at the thaw, the one coalesced behind it (the host's one write in
    // flight, `Sim::write`) within persist_max; the check looks every millisecond.
    let bound = 2 * s.opts.persist_max + ms(2);
    let limit = stall_end + bound;
    let mut applied = None;
    while s.now < limit && s.check.violations.is_empty() {
        if s.heartbeat_of(l) == Some(last.heartbeat) {
            applied = Some(s.now);
            break;
        }
        s.run_for(ms(1));
    }
    let Some(at) = applied else {
        return Some(format!(
            "L-reload: leader {l}'s disk thawed at {} ms; its last reload's heartbeat ({} us, \
             {shape:?}: {}) not in force {} us later (in force: {:?})",
            stall_end / ms(1),
            last.heartbeat.as_micros(),
            plan.steps(l),
            bound / 1000,
            s.heartbeat_of(l)
        ));
    };
    // Past the thaw by a hold, so that the safety checks see what the disk held leave.
    s.run_until(stall_end + hold);
    out.reload_stall = Some((shape as u8, (at - stall_end) as f64 / 1e6));
    None
}

/// L-reload's sequences of reloads of every server on a stalled leader
/// (`reload_stall_episode`), a quarter of its seeds each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReloadShape {
    /// Once to longer timers.
    Once = 0,
    /// Longer, back to the timers in force, longer again (a fresh draw): the reload
    /// back ends the staging and the leader's next heartbeat shrinks its promise with
    /// a write that must hold nothing.
    Back = 1,
    /// Longer, longer still, the first longer again: the last reload lowers the
    /// promise floor, and the next heartbeat shrinks the promise the same way.
    Among = 2,
    /// The second review's D1: longer while the disk works, until that hold is on disk
    /// and in force; then, the disk stalled, back to the timers before (the promise
    /// shrinks with a write that holds nothing and stalls), and up to the longer again
    /// while that write is in flight: the hold on disk does not cover those timers,
    /// the lowest hold that may land does not (`min_hold_pending`), so they wait.
    BackToDisk = 3,
}

/// What L-reload does once its preconditions hold, all drawn before anything runs.
struct ReloadPlan {
    shape: ReloadShape,
    /// Each step: how long after the stall begins, and every server's timers (server
    /// i + 1 at index i); each step ends (`reload_every`) before the next begins.
    phases: Vec<(Real, Vec<Timers>)>,
    /// Timers every server is reloaded to, and in force on the leader with their hold
    /// on its disk, before the stall (`ReloadShape::BackToDisk`).
    before_stall: Option<Timers>,
    /// How long the leader's disk stalls.
    stall: Real,
}

impl ReloadPlan {
    /// The heartbeats `id` is reloaded to, for a report.
    fn steps(&self, id: u16) -> String {
        let hb = |t: &Timers| format!("{} us", t.heartbeat.as_micros());
        let mut v: Vec<String> = self
            .before_stall
            .iter()
            .map(|t| hb(t) + " before")
            .collect();
        v.extend(
            self.phases.iter().map(|(off, to)| {
                format!("{} at +{} ms", hb(&to[usize::from(id) - 1]), off / ms(1))
            }),
        );
        v.join(", ")
    }
}

/// Draws L-reload's plan: every longer heartbeat 1.5 to 3 times the longest in force
/// (with the longest K and RTT: a longer hold than any in force), the shape, the
/// steps' times and the stall (from the last step on, two to three of its holds: past
/// the lease of a leader whose heartbeats stop then). None if a hold would pass 60 s.
fn reload_plan(s: &mut Sim) -> Option<ReloadPlan> {
    let hbt = max_hbt(s);
    let k = s.hosts.iter().map(|h| h.timers.k).max().unwrap_or(3);
    let rtt = s
        .hosts
        .iter()
        .map(|h| h.timers.rtt)
        .max()
        .unwrap_or_default();
    let with = |hb: Real| Timers {
        heartbeat: Duration::from_nanos(hb),
        rtt,
        k,
    };
    let cap = Duration::from_secs(60).as_nanos() as u64;
    let t1 = with(3 * hbt / 2 + s.rand(3 * hbt / 2 + 1));
    if t1.hold() > cap {
        return None;
    }
    let shape = [
        ReloadShape::Once,
        ReloadShape::Back,
        ReloadShape::Among,
        ReloadShape::BackToDisk,
    ][s.rand(4) as usize];
    let n = s.opts.n;
    let every = |t: Timers| vec![t; n];
    let now: Vec<Timers> = s.hosts.iter().map(|h| h.timers).collect();
    let h1 = t1.hold();
    // A step's reloads all come within a heartbeat of its start.
    let gap = hbt + 1;
    let (phases, before_stall) = match shape {
        ReloadShape::Once => (vec![(0, every(t1))], None),
        ReloadShape::Back | ReloadShape::Among => {
            let third = if shape == ReloadShape::Back {
                with(3 * hbt / 2 + s.rand(3 * hbt / 2 + 1))
            } else {
                t1
            };
            let second = if shape == ReloadShape::Back {
                now
            } else {
                let hb = t1.heartbeat.as_nanos() as u64;
                every(with(hb + 1 + s.rand(hb / 2)))
            };
            if third.hold().max(second[0].hold()) > cap {
                return None;
            }
            let off2 = gap + s.rand(h1 + 1);
            let off3 = off2 + gap + s.rand(h1 + 1);
            (
                vec![(0, every(t1)), (off2, second), (off3, every(third))],
                None,
            )
        }
        ReloadShape::BackToDisk => {
            // Back up once the leader's faith in its own LEADs of the longer hold has
            // run down to the shorter one (its promise shrank with a write asked for,
            // stalled): after the hold, a heartbeat and a tenth for a fast clock.
            let off2 = gap + (h1 + hbt) * 11 / 10 + s.rand(hbt + 1);
            (vec![(0, now), (off2, every(t1))], Some(t1))
        }
    };
    let (off, to) = phases.last()?;
    let h_last = to.iter().map(|t| t.hold()).max().unwrap_or(h1);
    let stall = off + gap + 2 * h_last + s.rand(h_last + 1);
    Some(ReloadPlan {
        shape,
        phases,
        before_stall,
        stall,
    })
}

/// One step of L-reload: server i + 1 reloaded to `to[i]` at `at` plus up to `spread`.
fn reload_every(s: &mut Sim, at: Real, spread: Real, to: &[Timers]) {
    for (i, &t) in to.iter().enumerate() {
        let when = at + 1 + s.rand(spread);
        s.reload_at(i as u16 + 1, when, t);
    }
}

/// `ReloadShape::BackToDisk`'s start, the disk working: every server reloaded to
/// `longer` within a heartbeat; two holds later the leader must still lead, nobody may
/// have been elected, and the timers must be in force on it with their hold on its disk
/// (its staged write lands within two writes' time, persist_max each). Err(None) skips
/// the episode (a violation, or a server of `side` that no longer follows the leader),
/// Err(Some(failure)).
fn reload_before_stall(
    s: &mut Sim,
    l: u16,
    side: &[u16],
    longer: Timers,
) -> Result<(), Option<String>> {
    let t = s.now;
    let won = s.check.won.len();
    reload_every(s, t, max_hbt(s), &vec![longer; s.opts.n]);
    let ready = t + max_hbt(s) + 1 + 2 * longer.hold() + 2 * s.opts.persist_max;
    s.run_until(ready);
    if !s.check.violations.is_empty() {
        return Err(None);
    }
    let elected = s.check.won[won..].first().copied();
    let disk_ms = u64::from(s.hosts[usize::from(l) - 1].disk.hold_ms);
    let on_disk = disk_ms * ms(1) >= longer.hold();
    if s.leader() != Some(l)
        || elected.is_some()
        || s.heartbeat_of(l) != Some(longer.heartbeat)
        || !on_disk
    {
        return Err(Some(format!(
            "L-reload: leader {l}, its disk working, reloaded at {} ms to heartbeat {} us \
             (hold {} ms): at {} ms leaders {:?}, elected since {elected:?}, heartbeat in \
             force {:?}, hold on disk {disk_ms} ms",
            t / ms(1),
            longer.heartbeat.as_micros(),
            longer.hold() / ms(1),
            s.now / ms(1),
            s.leaders(),
            s.heartbeat_of(l),
        )));
    }
    let follows = side
        .iter()
        .all(|&x| s.status(x).is_some_and(|st| st.leader == Some(l)));
    if follows { Ok(()) } else { Err(None) }
}

fn seeds() -> Vec<u64> {
    if let Some(one) = std::env::var("SWARM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return vec![one];
    }
    let count = std::env::var("SWARM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_SEEDS);
    // SWARM_FROM=a starts at seed a (a hunt past the default seeds).
    let from: u64 = std::env::var("SWARM_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (from..from + count).collect()
}

/// Runs `seeds` on two threads; stops early once `stop` says so.
fn run_all(
    seeds: &[u64],
    broken: &Breakage,
    stop: impl Fn(&Outcome) -> bool + Sync,
) -> Vec<(u64, Outcome)> {
    let done = std::sync::atomic::AtomicBool::new(false);
    let threads = 2;
    let mut results: Vec<(u64, Outcome)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (done, stop) = (&done, &stop);
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    for &seed in seeds.iter().skip(t).step_by(threads) {
                        if done.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let o = run_seed(seed, broken);
                        if stop(&o) {
                            done.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        mine.push((seed, o));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("swarm thread"))
            .collect()
    });
    results.sort_by_key(|r| r.0);
    results
}

#[test]
fn swarm() {
    let seeds = seeds();
    let results = run_all(&seeds, &Breakage::default(), |_| false);
    let events: u64 = results.iter().map(|r| r.1.events).sum();
    let mut violations = 0;
    let mut liveness = 0;
    for (seed, o) in &results {
        let replay = format!(
            "SWARM_SEED={seed} SIM_TRACE=1 cargo test --release --test swarm swarm -- --nocapture"
        );
        for v in &o.violations {
            violations += 1;
            eprintln!("seed {seed}: {v}\n  replay: {replay}");
        }
        if let Some(l) = &o.liveness {
            liveness += 1;
            eprintln!("seed {seed}: {l}\n  replay: {replay}");
        }
    }
    let mut f: Vec<f64> = results
        .iter()
        .flat_map(|r| r.1.failover_ms.iter().copied())
        .collect();
    f.sort_by(f64::total_cmp);
    if !f.is_empty() {
        eprintln!(
            "swarm failovers under faults: {} crashes, median {:.0} ms, max {:.0} ms",
            f.len(),
            f[f.len() / 2],
            f[f.len() - 1]
        );
    }
    let mut st = sim::Stats::default();
    for (_, o) in &results {
        st.add(&o.stats);
    }
    let health_seeds = results.iter().filter(|r| r.1.health).count();
    let group_seeds = results.iter().filter(|r| r.1.groups > 1).count();
    let groups_run: usize = results.iter().map(|r| r.1.groups).sum();
    let rounds: usize = results.iter().map(|r| r.1.independent_rounds).sum();
    let cold: usize = results.iter().map(|r| r.1.cold_checked).sum();
    let cold_seeds = results.iter().filter(|r| r.1.cold_checked > 0).count();
    let after: usize = results.iter().map(|r| r.1.after_checked).sum();
    let after_moved: usize = results.iter().map(|r| r.1.after_moved).sum();
    let after_seeds = results.iter().filter(|r| r.1.after_checked > 0).count();
    let episodes: usize = results.iter().map(|r| r.1.after_episodes).sum();
    eprintln!(
        "swarm preference (issue 22): {cold} cold starts of groups checked (P-cold) in \
         {cold_seeds} seeds; P-after: {after} groups checked in {after_seeds} seeds with \
         preempt-delay ({episodes} rolling restarts), {after_moved} moved, each once and \
         straight to its preferred server"
    );
    eprintln!(
        "swarm groups (issue 12): {group_seeds} seeds with 2-4 groups ({groups_run} groups in \
         all seeds), {rounds} elections in independence episodes"
    );
    eprintln!(
        "swarm adversaries: late copies {}, flushed {}, aimed {}, crashes in a write {}, \
         reloads {}, suspends {}, planned stops {} ({} hung); health (issue 11, {health_seeds} \
         seeds): changes {} ({} aimed at lease and timer ends), all unhealthy {}, healthy \
         server cut off {}, drains {}, undrains {}, yields to {}, handovers: yield {} health \
         {} drain {} preempt {}; issue 20: LEADs held {}, episodes {} (a second leader \
         elected while the first sat {}, the first re-elected after {}; re-elections on a \
         floor {}); supervisor stalls \
         (issue 21) {}; issue 24: SIGTERM stops {}, confirmations sent twice or after an \
         older one {}, supervisor reconnections {}; issue 25: renewals through stop timers {}",
        st.late,
        st.flushed,
        st.aimed,
        st.crashes_in_write,
        st.reloads,
        st.suspends,
        st.planned_stops,
        st.hung,
        st.health_flips,
        st.health_aimed,
        st.all_unhealthy,
        st.healthy_cut_off,
        st.drains,
        st.undrains,
        st.yields_to,
        st.handovers[0],
        st.handovers[1],
        st.handovers[2],
        st.handovers[3],
        st.leads_held,
        st.lead_episodes,
        st.concurrent,
        st.reelected_after,
        st.floors,
        st.sup_stalls,
        st.stops,
        st.confirmed_twice,
        st.reconnects,
        st.timer_renewals
    );
    eprintln!(
        "swarm wire (issue 25): {} datagrams in version 7/8, {} in 5/6, {} in 3 ({} \
         probes' copies); holding only LEADs and ACKs: {} in 7/8, {} in 5/6, {} in 3",
        st.framings[2],
        st.framings[1],
        st.framings[0],
        st.probes,
        st.heartbeat_framings[2],
        st.heartbeat_framings[1],
        st.heartbeat_framings[0]
    );
    eprintln!(
        "swarm reads at the heartbeat (issue 25): {} datagrams waited for a wakeup; {} \
         reached a leader",
        st.deferred, st.leader_received
    );
    eprintln!(
        "swarm sparse acknowledgements (issue 25): {} of {} LEADs asked only some \
         followers; {} ACKs sent; {} seeds in multicast, the others unicast (targeted \
         heartbeats)",
        st.sparse_leads,
        st.leads_sent,
        st.acks_sent,
        results.iter().filter(|r| multicast_for(r.0)).count()
    );
    let rest: usize = results.iter().map(|r| r.1.rest_episodes).sum();
    let lapses: usize = results.iter().map(|r| r.1.rest_lapses).sum();
    eprintln!(
        "swarm lease at rest (L-rest, issue 25): {rest} episodes of bounded ACK loss, {} \
         LEADs ({} sparse), {} bursts ({} begun on a sparse LEAD), {} ACKs lost and {} \
         late; {} reloads to a longer heartbeat while sparse ({} followed by a sparse \
         LEAD); {lapses} lapses",
        st.ack_loss_leads,
        st.ack_loss_sparse_leads,
        st.ack_loss_bursts,
        st.ack_loss_sparse_bursts,
        st.ack_loss_lost,
        st.ack_loss_late,
        st.ack_loss_reloads,
        st.ack_loss_reload_sparse
    );
    let turns: usize = results.iter().map(|r| r.1.turn_episodes).sum();
    let turn_drops: usize = results.iter().map(|r| r.1.turn_drops).sum();
    eprintln!(
        "swarm needless rounds (L-turn, targeted heartbeats): {turns} episodes of LEADs lost \
         at rest, {turn_drops} sparse LEADs lost to the followers they name"
    );
    let mut drains: Vec<(u8, f64, f64)> = results.iter().filter_map(|r| r.1.drain_stall).collect();
    drains.sort_by(|a, b| a.1.total_cmp(&b.1));
    if !drains.is_empty() {
        let shapes: Vec<usize> = (0..3)
            .map(|k| drains.iter().filter(|d| d.0 == k).count())
            .collect();
        let worst = drains.iter().map(|d| d.1 / d.2).fold(0.0, f64::max);
        eprintln!(
            "swarm drains on a stalled disk (L-drain): {} episodes (stall before the drain {}, \
             at it {}, just after {}), handover median {:.0} ms, max {:.0} ms, at most {:.0} % \
             of its bound",
            drains.len(),
            shapes[0],
            shapes[1],
            shapes[2],
            drains[drains.len() / 2].1,
            drains[drains.len() - 1].1,
            100.0 * worst
        );
    }
    let episodes: Vec<(u8, f64)> = results.iter().filter_map(|r| r.1.reload_stall).collect();
    let mut reloads: Vec<f64> = episodes.iter().map(|e| e.1).collect();
    reloads.sort_by(f64::total_cmp);
    if !reloads.is_empty() {
        let shapes: Vec<usize> = (0..4)
            .map(|k| episodes.iter().filter(|e| e.0 == k).count())
            .collect();
        eprintln!(
            "swarm reloads on a stalled disk (L-reload): {} episodes (once {}, back {}, among \
             longer {}, back to the hold on disk {}), the lease kept in every one; the last \
             reload's timers in force after the thaw: median {:.1} ms, max {:.1} ms",
            reloads.len(),
            shapes[0],
            shapes[1],
            shapes[2],
            shapes[3],
            reloads[reloads.len() / 2],
            reloads[reloads.len() - 1]
        );
    }
    // Straight to stderr, past the test harness's capture: the line belongs in CI logs.
    let _ = writeln!(
        std::io::stderr(),
        "swarm: seeds={} events={events} violations={violations} liveness_failures={liveness}",
        results.len()
    );
    assert_eq!(violations, 0);
    assert_eq!(liveness, 0);
    // The shares below are the whole run's: one replayed seed (`SWARM_SEED`, the line
    // printed with every failure) may not reach them, and its verdict is the violations
    // and liveness failures above (seed 12914 alone sent 4,816 compact datagrams
    // against 717 probes, under the 10x the run's share wants).
    if results.len() < AGGREGATE_MIN_SEEDS {
        eprintln!(
            "swarm: {} seeds, fewer than {AGGREGATE_MIN_SEEDS}: the whole run's shares (wire \
             versions, stop timers, reads at the heartbeat, sparse acknowledgements) are not \
             checked",
            results.len()
        );
        return;
    }
    // The hosts of the swarm are all of this build: most of their heartbeats are
    // compact (rounds mostly are not: a server sends a round's messages to all in
    // version 3 until it has heard every peer in compact, and every seed starts cold
    // and restarts servers). Without the negotiation only the probes' copies would be.
    assert!(
        st.heartbeat_framings[2] > st.heartbeat_framings[0] + st.heartbeat_framings[1]
            && st.framings[2] > 10 * st.probes,
        "the swarm's hosts must speak the newest wire (versions 7 and 8)"
    );
    assert!(
        st.timer_renewals > 0,
        "no supervisor renewed through its stop timers"
    );
    // Leaders at rest read at the heartbeat (issue 25): a change that silently keeps
    // them reading at once (or never lets a host's datagrams wait) fails here.
    assert!(
        st.deferred * 100 >= st.leader_received * DEFERRED_MIN_PCT,
        "only {} of the {} datagrams that reached a leader waited for its heartbeat \
         (at least {DEFERRED_MIN_PCT} % expected)",
        st.deferred,
        st.leader_received
    );
    // Sparse acknowledgements (issue 25): a change that keeps every LEAD asking every
    // follower fails here.
    assert!(
        st.sparse_leads * 100 >= st.leads_sent * SPARSE_MIN_PCT,
        "only {} of the {} LEADs asked only some followers (at least {SPARSE_MIN_PCT} % \
         expected)",
        st.sparse_leads,
        st.leads_sent
    );
}

/// The fewest seeds whose totals the swarm holds to its shares (wire versions, stop
/// timers, reads at the heartbeat, sparse acknowledgements); the default run has 10,000.
const AGGREGATE_MIN_SEEDS: usize = 100;

/// The share of the datagrams reaching a leader that the swarm must see wait for the
/// leader's next wakeup (issue 25): most of them are ACKs of a leader at rest.
const DEFERRED_MIN_PCT: u64 = 25;

/// The share of LEADs (not RESIGNs) the swarm must see ask only some followers to
/// acknowledge them (issue 25, sparse acknowledgements): 18 % of 4,933,441 when this
/// was written, under every fault of the swarm; with `Sabotage::dense_acks`, none
/// (`sparse_acknowledgements_are_counted`).
const SPARSE_MIN_PCT: u64 = 10;

/// P-after judges from when the leader could have heard every server fit (`slow_hbt`).
/// Seed 12914 (outside the default range): group 3 prefers 3, then 2, then 1; a
/// rolling restart brings 2 back, then 3 606 ms later; the leader (1, its clock at
/// -rho = -5 %, HBT 480 ms, LEADs 505 ms apart) hears 2 fit for preempt-delay (894 ms)
/// at the tick of the first LEAD after 3 turned fit, while its only report of 3 is the
/// ACK of the LEAD before, which said unfit: it hands over to 2 (SPEC 14), and 2 to 3
/// a delay later. Counted from a heartbeat at the nominal rate, P-after began 1.7 ms
/// before that tick and called it a detour; counted on the slowest clock it begins
/// after, and the group moves once, 2 -> 3. The seed must still run P-after (one
/// rolling restart) and find nothing else.
#[test]
fn p_after_waits_for_the_slow_heartbeat() {
    let o = run_seed(12914, &Breakage::default());
    assert!(
        o.violations.is_empty() && o.liveness.is_none(),
        "seed 12914: {:?} {:?}",
        o.violations,
        o.liveness
    );
    assert_eq!(
        o.after_episodes, 1,
        "seed 12914 no longer runs P-after's episode"
    );
}

/// The swarm's count of sparse LEADs measures what it claims: over the same seeds a
/// build that never asks only some followers (`Sabotage::dense_acks`) shows none, and
/// this build shows some, while neither finds a violation.
#[test]
fn sparse_acknowledgements_are_counted() {
    let seeds: Vec<u64> = (0..200).collect();
    let sparse = |broken: &Breakage| {
        let results = run_all(&seeds, broken, |_| false);
        let mut st = sim::Stats::default();
        for (seed, o) in &results {
            assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
            st.add(&o.stats);
        }
        (st.sparse_leads, st.leads_sent)
    };
    let (some, leads) = sparse(&Breakage::default());
    let (none, dense_leads) = sparse(&Breakage {
        sabotage: Sabotage {
            dense_acks: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    });
    eprintln!("sparse LEADs: {some} of {leads}; with dense_acks {none} of {dense_leads}");
    assert!(some * 100 >= leads * SPARSE_MIN_PCT, "{some} of {leads}");
    assert_eq!(none, 0, "dense_acks must ask every follower");
}

/// Runs the default seeds with a breakage until one reports a violation named in
/// `expected`; panics if none does. Returns the catching seed.
fn catch(test: &str, name: &str, sabotage: Sabotage, monotonic: bool, expected: &[&str]) -> u64 {
    let broken = Breakage {
        sabotage,
        monotonic,
        ..Breakage::default()
    };
    catch_broken(test, name, &broken, expected)
}

/// Runs the default seeds with `broken` until one reports a violation or a liveness
/// failure whose text starts with one of `expected`; panics if none does.
/// A negative control with an asserted seed: `broken` is caught within the default
/// seeds (`catch_broken`), and, whatever the search order, still at `asserted` by a
/// finding that starts with one of `expected`; with `clean_without` (a liveness
/// breakage), `asserted` passes without it.
fn caught_at(
    test: &str,
    name: &str,
    broken: &Breakage,
    expected: &[&str],
    asserted: u64,
    clean_without: bool,
) {
    let seed = catch_broken(test, name, broken, expected);
    eprintln!("{name}: first caught at seed {seed}");
    let o = run_seed(asserted, broken);
    let found: Vec<&String> = o.violations.iter().chain(o.liveness.iter()).collect();
    assert!(
        found
            .iter()
            .any(|v| expected.iter().any(|p| v.starts_with(p))),
        "seed {asserted} no longer catches {name}: {found:?}"
    );
    if clean_without {
        let fixed = run_seed(asserted, &Breakage::default());
        assert!(
            fixed.violations.is_empty() && fixed.liveness.is_none(),
            "seed {asserted} fails without the breakage ({name}): {:?} {:?}",
            fixed.violations,
            fixed.liveness
        );
    }
}

fn catch_broken(test: &str, name: &str, broken: &Breakage, expected: &[&str]) -> u64 {
    let started = std::time::Instant::now();
    // SWARM_SEED=s replays one seed (with SIM_TRACE=1, its trace); SWARM_SEEDS=n
    // searches the first n.
    let seeds = seeds();
    let what = |o: &Outcome| {
        o.violations
            .iter()
            .chain(o.liveness.iter())
            .find(|v| expected.iter().any(|e| v.starts_with(e)))
            .cloned()
    };
    // SWARM_COUNT=1 runs every seed and counts those that catch it (its rate).
    let count = std::env::var_os("SWARM_COUNT").is_some();
    let results = run_all(&seeds, broken, |o| !count && what(o).is_some());
    if count {
        let hits: Vec<u64> = results
            .iter()
            .filter(|r| what(&r.1).is_some())
            .map(|r| r.0)
            .collect();
        let _ = writeln!(
            std::io::stderr(),
            "negative control '{name}': {} of {} seeds catch it: {:?}",
            hits.len(),
            results.len(),
            &hits[..hits.len().min(40)]
        );
    }
    let hit = results.iter().find(|r| what(&r.1).is_some());
    let (seed, o) = hit.unwrap_or_else(|| {
        panic!(
            "negative control '{name}': no {expected:?} failure in {} seeds",
            results.len()
        )
    });
    let v = what(o).expect("found");
    let _ = writeln!(
        std::io::stderr(),
        "negative control '{name}': caught at seed {seed} after {} seeds, {:.1} s: {v}\n  \
         replay: SWARM_SEED={seed} SIM_TRACE=1 cargo test --release --test swarm {test} -- --exact --nocapture",
        results.len(),
        started.elapsed().as_secs_f64(),
    );
    *seed
}

/// The checker can fail: a protocol broken on purpose must be caught within the default
/// seeds. Each breakage stops at its first violation.
#[test]
fn negative_control() {
    catch(
        "negative_control",
        "tallies kept across terms",
        Sabotage {
            stale_tallies: true,
            ..Sabotage::default()
        },
        false,
        &["S1", "S2", "S3"],
    );
    catch(
        "negative_control",
        "votes not persisted",
        Sabotage {
            forget_votes: true,
            ..Sabotage::default()
        },
        false,
        &["S4", "S1"],
    );
    catch(
        "negative_control",
        "live leader ignored",
        Sabotage {
            ignore_live_leader: true,
            ..Sabotage::default()
        },
        false,
        &["S2", "S3"],
    );
}

/// Issue 10, finding 1 reverted: the term led is volatile and any RESIGN releases.
#[test]
fn negative_control_volatile_led() {
    catch(
        "negative_control_volatile_led",
        "volatile_led",
        Sabotage {
            volatile_led: true,
            ..Sabotage::default()
        },
        false,
        &["S2", "S3", "S1", "S5"],
    );
}

/// Issue 10, finding 2 reverted: the hold in LEADs is truncated to whole milliseconds.
#[test]
fn negative_control_hold_rounded_down() {
    catch(
        "negative_control_hold_rounded_down",
        "hold_rounded_down",
        Sabotage {
            hold_rounded_down: true,
            ..Sabotage::default()
        },
        false,
        &["S2", "S5"],
    );
}

/// Issue 10, finding 3 reverted: a LEAD's hold replaces the faith an earlier one earned.
#[test]
fn negative_control_hold_replaced() {
    catch(
        "negative_control_hold_replaced",
        "hold_replaced",
        Sabotage {
            hold_replaced: true,
            ..Sabotage::default()
        },
        false,
        &["S2", "S5"],
    );
}

/// Issue 10, finding 4 reverted: the RESIGN leaves before the supervisors confirm.
#[test]
fn negative_control_resign_early() {
    catch(
        "negative_control_resign_early",
        "resign_early",
        Sabotage {
            resign_early: true,
            ..Sabotage::default()
        },
        false,
        &["S5"],
    );
}

/// Issue 10, finding 5: a clock that stops during a suspend (CLOCK_MONOTONIC) lets a
/// resumed leader believe in a lease that ended long ago in real time.
#[test]
fn negative_control_monotonic_suspend() {
    catch(
        "negative_control_monotonic_suspend",
        "monotonic_suspend",
        Sabotage::default(),
        true,
        &["S2", "S5"],
    );
}

/// Issue 11, H-fit and H-elect can fail: a driver that never tells the core about
/// health lets unhealthy servers be elected and keep their seats.
#[test]
fn negative_control_health_ignored() {
    catch_broken(
        "negative_control_health_ignored",
        "health ignored",
        &Breakage {
            ignore_health: true,
            ..Breakage::default()
        },
        &["H-fit", "H-elect"],
    );
}

/// Issue 11, H-stay can fail: a driver that yields as soon as its leader turns
/// unhealthy (keepalived's fault state, in effect) leaves the cluster leaderless when
/// nobody else could lead.
#[test]
fn negative_control_naive_health_yield() {
    catch_broken(
        "negative_control_naive_health_yield",
        "yield when unhealthy",
        &Breakage {
            naive_health_yield: true,
            ..Breakage::default()
        },
        &["H-stay"],
    );
}

/// Issue 12: server 1's driver swaps groups 0 and 1 on receipt (its group table out of
/// order); the per-group checks must catch it.
#[test]
fn negative_control_misrouted_group() {
    catch_broken(
        "negative_control_misrouted_group",
        "groups 0 and 1 swapped on server 1",
        &Breakage {
            misroute_group: true,
            ..Breakage::default()
        },
        &["S1", "S2", "S3", "S4", "S5", "I"],
    );
}

/// Issue 12: a driver that resigns group 0 whatever group `yield` names is caught by
/// the independence check.
#[test]
fn negative_control_yield_wrong_group() {
    catch_broken(
        "negative_control_yield_wrong_group",
        "yield in the wrong group",
        &Breakage {
            yield_wrong_group: true,
            ..Breakage::default()
        },
        &["I"],
    );
}

/// Issue 11, H-yield can fail: `yield ID` that drops its target elects the usual
/// choice instead of the named server.
#[test]
fn negative_control_yield_target_dropped() {
    catch_broken(
        "negative_control_yield_target_dropped",
        "yield target dropped",
        &Breakage {
            drop_yield_target: true,
            ..Breakage::default()
        },
        &["H-yield"],
    );
}

/// Issue 20 reverted: a re-elected leader keeps counting its old term's ACKs, so its
/// lease can rest on the stale ACK of a follower that has since followed another
/// leader (or been released by its RESIGN) and helped elect it. The swarm's LEAD
/// episodes (asymmetric LEAD delivery, concurrent leaderships, re-elections soon after
/// an election, yields naming the previous leader) find it by themselves. Asserted:
/// seed 187, the first default seed that reaches two leases (or two commands) at once
/// (re-measured when issue 25's compact wire and stop timers moved every schedule:
/// before, seed 343; 39 of the 10,000 default seeds did, without the S2-support
/// check; re-measured when
/// issue 24's supervisor reconnections joined the `stops` seeds: before, seed 299, 35),
/// and that it passes with the fix;
/// then the search runs as for the other controls, with the S2-support check that
/// reports the unsupported lease before any overlap (first at seed 35, 189 of 10,000).
/// (Re-measured with issue 22, whose first round at quiet + min(quiet, 5*HBT) moves
/// every schedule; before it: seed 161, 45; seed 81, 180. On the simulator driving
/// `electd::host`, issue 24; before that, with the simulator's own copy of the shell:
/// seed 203, 40; seed 35, 188.)
#[test]
fn negative_control_reelect_keeps_acks() {
    let broken = Breakage {
        sabotage: Sabotage {
            reelect_keeps_acks: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    let expected = ["S2", "S5"];
    if std::env::var_os("SWARM_SEED").is_none() {
        // Without the support check the seed runs on to two leases at once.
        let overlap = Breakage {
            no_support: true,
            ..broken.clone()
        };
        let o = run_seed(REELECT_KEEPS_ACKS_SEED, &overlap);
        assert!(
            o.violations
                .iter()
                .any(|v| v.starts_with("S2: leases overlap") || v.starts_with("S5:")),
            "seed {REELECT_KEEPS_ACKS_SEED} no longer shows the overlap: {:?}",
            o.violations
        );
        eprintln!(
            "negative control 'reelect_keeps_acks': seed {REELECT_KEEPS_ACKS_SEED} without \
             the support check: {}",
            o.violations[0]
        );
        let fixed = run_seed(REELECT_KEEPS_ACKS_SEED, &Breakage::default());
        assert!(
            fixed.violations.is_empty() && fixed.liveness.is_none(),
            "seed {REELECT_KEEPS_ACKS_SEED} fails with the fix: {:?} {:?}",
            fixed.violations,
            fixed.liveness
        );
    }
    catch_broken(
        "negative_control_reelect_keeps_acks",
        "reelect_keeps_acks",
        &broken,
        &expected,
    );
}

/// The first default seed at which the swarm catches `reelect_keeps_acks`.
const REELECT_KEEPS_ACKS_SEED: u64 = 187;

/// Issue 21: a supervisor stall that stops the lease-end enforcer too (only a frozen
/// host does that) lets the command outlive its lease: the S5 check must catch it.
#[test]
fn negative_control_stall_enforcer() {
    catch_broken(
        "negative_control_stall_enforcer",
        "enforcer stalled with its supervisor",
        &Breakage {
            stall_enforcer: true,
            ..Breakage::default()
        },
        &["S5"],
    );
}

/// Issue 24, a shell rule broken in the host the daemon runs: a RESIGN released on a
/// supervisor's confirmation of a line older than its last leader line (a confirmation
/// of an earlier stop, or of the leader line itself), while its command still runs on
/// the newer lease. The next leader's command overlaps it: S5 must see it.
#[test]
fn negative_control_release_on_older_confirmation() {
    let broken = Breakage {
        release_older: true,
        ..Breakage::default()
    };
    caught_at(
        "negative_control_release_on_older_confirmation",
        "RESIGN released on an older confirmation",
        &broken,
        &["S5"],
        RELEASE_OLDER_SEED,
        false,
    );
}

/// Issue 24, a shell rule broken in the host: a SIGTERM that hands over nothing, so the
/// server exits holding its lease (the rolling restarts of the `stops` seeds).
#[test]
fn negative_control_stop_without_yield() {
    let broken = Breakage {
        stop_without_yield: true,
        ..Breakage::default()
    };
    caught_at(
        "negative_control_stop_without_yield",
        "a stop that hands over nothing",
        &broken,
        &["STOP"],
        STOP_WITHOUT_YIELD_SEED,
        false,
    );
}

/// Issue 24, a shell rule broken in the host: a supervisor that disconnects without
/// confirming counts as clear, so a RESIGN waiting for it leaves while its command
/// runs on to the lease end it was told. S5 must see the next leader's command start.
#[test]
fn negative_control_departure_confirms() {
    let broken = Breakage {
        departure_confirms: true,
        ..Breakage::default()
    };
    caught_at(
        "negative_control_departure_confirms",
        "a departed supervisor counts as clear",
        &broken,
        &["S5"],
        DEPARTURE_CONFIRMS_SEED,
        false,
    );
}

/// The first default seed at which the swarm catches `HostSabotage::departure_confirms`
/// (7 before issue 25's reads at the heartbeat moved the schedules; 31 was asserted
/// until a write that only shortens the hold promise no longer held datagrams, which
/// moved that seed's schedule: 926 of the 10,000 default seeds catch it now).
const DEPARTURE_CONFIRMS_SEED: u64 = 3;

/// Issue 25, the stop timers: a host that arms a supervisor's timers past the lease end
/// lets its command outlive the lease (every other simulated connection passes timers):
/// S5 must see the next leader's command start while it runs.
#[test]
fn negative_control_timers_late() {
    catch_broken(
        "negative_control_timers_late",
        "stop timers armed past the lease",
        &Breakage {
            timers_late: true,
            ..Breakage::default()
        },
        &["S5"],
    );
}

/// Issue 25, reads at the heartbeat: hosts whose datagrams always wait for their next
/// wakeup, even without a lease, in a round, with ACKs missing. A follower then reads
/// its leader's LEADs only when its hold runs out, and a candidate hears the claims
/// and votes of a round only at its own timers: the swarm must see a cluster left
/// without a leader (the final liveness check catches it first at seed 6 since the
/// waiting datagrams share their wakeup's flush; seed 8 before, and seed 4 before a
/// preemption asked its followers before handing over).
#[test]
fn negative_control_defer_always() {
    let broken = Breakage {
        defer_always: true,
        ..Breakage::default()
    };
    caught_at(
        "negative_control_defer_always",
        "datagrams always wait for the next wakeup",
        &broken,
        &["end:"],
        DEFER_ALWAYS_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `HostSabotage::defer_always`.
const DEFER_ALWAYS_SEED: u64 = 6;

/// The first default seed at which the swarm catches `HostSabotage::stop_without_yield`.
const STOP_WITHOUT_YIELD_SEED: u64 = 23;

/// The first default seed at which the swarm catches
/// `HostSabotage::release_on_older_confirmation` (seed 0 before issue 22 moved the
/// schedules: its first round waits for every quiet period).
const RELEASE_OLDER_SEED: u64 = 4;

/// Issue 24, a shell rule broken in the host the daemon runs: a write confirmed to the
/// cores when it is handed out, before the disk has it. A crash in the write then
/// loses a vote or a term that already left: the persistence checks must see it.
#[test]
fn negative_control_host_confirms_write_early() {
    // Seed 17, the first default seed that catches it (S3: a term led again after a
    // restart), asserted whatever the search order: a change of the host or of the
    // simulator that hides this breakage shows.
    let broken = Breakage {
        confirm_early: true,
        ..Breakage::default()
    };
    caught_at(
        "negative_control_host_confirms_write_early",
        "host confirms writes early",
        &broken,
        &["S1", "S2", "S3", "S4", "S5"],
        CONFIRM_EARLY_SEED,
        false,
    );
}

/// The first default seed at which the swarm catches `HostSabotage::confirm_early`.
const CONFIRM_EARLY_SEED: u64 = 17;

/// Issue 22: claims ranked without preference (no priority, so no `prefer` and no
/// `balance` either): the cold starts of the seeds that P-cold checks elect the
/// smallest id rather than the preferred server. First caught at seed 12 (965 of the
/// 10,000 default seeds catch it, `SWARM_COUNT=1`); seed 12 is asserted, and that it
/// passes without the breakage.
#[test]
fn negative_control_unranked_claims() {
    let broken = Breakage {
        sabotage: Sabotage {
            unranked_claims: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_unranked_claims",
        "claims ranked without preference",
        &broken,
        &["P-cold"],
        UNRANKED_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::unranked_claims`.
const UNRANKED_SEED: u64 = 12;

/// Issue 22, H-last can fail: without the last-resort rule (SPEC 13), a leader that
/// crashes while every other server is unhealthy leaves the cluster leaderless until a
/// check passes, and the swarm catches it.
#[test]
fn negative_control_no_last_resort() {
    let broken = Breakage {
        sabotage: Sabotage {
            no_last_resort: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_no_last_resort",
        "last resort switched off",
        &broken,
        &["H-last"],
        NO_LAST_RESORT_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::no_last_resort`.
const NO_LAST_RESORT_SEED: u64 = 11;

/// Issue 22, finding 2 reverted: with preempt-delay a leader hands over to the most
/// preferred server fit for the delay, even while a more preferred one is fit but not
/// yet for the delay (`Sabotage::preempt_detours`): a rolling restart that brings the
/// second choice back before the first moves a group twice (3 -> 2 -> 1), and P-after
/// catches it. The catching seed is asserted, and that it passes without the breakage.
#[test]
fn negative_control_preempt_detours() {
    let broken = Breakage {
        sabotage: Sabotage {
            preempt_detours: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_preempt_detours",
        "preemption with detours",
        &broken,
        &["P-after"],
        DETOUR_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::preempt_detours` (43
/// before P-after counted the heartbeat on the slowest clock: its later start moved
/// the rolling restarts of the seeds whose restart begins at P-after's end, not at 60 s;
/// seed 34's now brings 3 back before 2 in group 1, and 1169's no longer catches,
/// 127 of 10,000 either way; 305 before issue 25's sparse acknowledgements and wire
/// versions 7/8 moved the schedules). 43 since targeted heartbeats (a quarter of the
/// seeds multicast, the rest sending LEADs to the asked followers only), 122 of
/// 10,000 seeds.
const DETOUR_SEED: u64 = 43;

/// Issue 25, sparse acknowledgements: a leader that stays sparse after an ACK it asked
/// for did not come (`Sabotage::sparse_ignores_misses`) keeps asking Q-1 followers, so
/// losing the asked ACKs of K-1 LEADs in a row costs its lease, where asking everyone
/// after the first miss keeps it. No end-state check sees that (3,000 seeds, no
/// failure, before L-rest); L-rest's episode of bounded ACK loss does: first at seed
/// 7, in 1,704 of the 10,000 default seeds (`SWARM_COUNT=1`; seed 6 and 1,807 before
/// targeted heartbeats, 1,799 before L-rest's reload moved the schedules of the
/// episodes it runs in); with the episode taken out, in none. The catching seed is asserted, and that it passes without the
/// breakage.
#[test]
fn negative_control_sparse_ignores_misses() {
    let broken = Breakage {
        sabotage: Sabotage {
            sparse_ignores_misses: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_sparse_ignores_misses",
        "sparse after a missed ACK",
        &broken,
        &["L-rest"],
        SPARSE_IGNORES_MISSES_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::sparse_ignores_misses`.
const SPARSE_IGNORES_MISSES_SEED: u64 = 7;

/// Issue 25's lease-held gate: a leader that goes sparse whenever the new timers allow
/// it (`Sabotage::sparse_ignores_lease_held`), even while the lease it holds rests on
/// LEADs sent before a reload to a longer heartbeat and ends before the next LEAD's
/// ACKs can come, loses that lease to the asked ACKs of the first LEAD after the
/// reload. L-rest's reload (`rest_reload`) catches it; with the reload off
/// (`SWARM_NO_REST_RELOAD=1`) no default seed does. The catching seed is asserted, and
/// that it passes without the breakage.
#[test]
fn negative_control_sparse_ignores_lease_held() {
    let broken = Breakage {
        sabotage: Sabotage {
            sparse_ignores_lease_held: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_sparse_ignores_lease_held",
        "sparse on a lease held from before a reload",
        &broken,
        &["L-rest"],
        SPARSE_IGNORES_LEASE_HELD_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches
/// `Sabotage::sparse_ignores_lease_held` (seed 200 before the waiting datagrams shared
/// their wakeup's flush, 36 and 364 before targeted heartbeats moved the schedules): a reload
/// to a longer heartbeat, after which the lease acknowledged before it ends before the
/// ACKs of the LEAD after the first sparse one. 149 until a write that only shortens
/// the hold promise (as after a reload to shorter timers) no longer held datagrams,
/// which moved the schedules of seeds that reload: 212 of the 10,000 default seeds
/// catch it now.
const SPARSE_IGNORES_LEASE_HELD_SEED: u64 = 225;

/// L1 counts from the moment a majority is past its quiet period (docs/PROTOCOL.md,
/// "L1 after a reload to shorter timers"), not from "run for K*HBT": seed 22471 restarts
/// a server whose state file holds a 750 ms hold promised under the timers before a
/// reload to K*HBT = 200 ms, and its first round, at its quiet period plus SPEC 14's
/// wait, came 942 ms after the old premise held (bound 660 ms). With the premise
/// corrected the seed passes; a first round three heartbeats late is still caught there
/// and within the default seeds.
#[test]
fn negative_control_late_first_round() {
    let broken = Breakage {
        sabotage: Sabotage {
            late_first_round: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_late_first_round",
        "first round three heartbeats late",
        &broken,
        &["L1"],
        LATE_FIRST_ROUND_SEED,
        true,
    );
}

/// A restart after a reload to shorter timers, with a hold promise on disk longer than
/// K*HBT (it failed L1 before L1 counted from the quiet period's end).
const LATE_FIRST_ROUND_SEED: u64 = 22471;

/// Targeted heartbeats (docs/PROTOCOL.md): a follower that a sparse LEAD names arms its
/// round timer at its faith plus a heartbeat (`Node::wait_for_next_turn`). Without
/// that room (`Sabotage::no_turn_wait`) one lost LEAD addressed to it, with the next
/// one late by the network's jitter, finds it in a round against its healthy leader.
/// No other check of the swarm sees it; L-turn's episode of single lost LEADs at rest
/// does. The catching seed is asserted, and that it passes without the breakage.
#[test]
fn negative_control_no_turn_wait() {
    let broken = Breakage {
        sabotage: Sabotage {
            no_turn_wait: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_no_turn_wait",
        "named follower's timer at its faith",
        &broken,
        &["L-turn"],
        NO_TURN_WAIT_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::no_turn_wait` (88 of
/// the 10,000 default seeds, `SWARM_COUNT=1`): leader 1 of 3, K = 3; LEAD 630 (the
/// first sparse one, to everyone) named follower 2, its next turn (632) was lost, and
/// its timer at 630's faith opened a round (136,101 ms) before LEAD 633 came.
const NO_TURN_WAIT_SEED: u64 = 311;

/// Targeted heartbeats: the first sparse LEAD after a dense one goes to every follower.
/// Sent only to the ones it names (`Sabotage::first_sparse_targeted`), the follower it
/// does not name keeps its timer at the dense LEAD's faith, and one lost LEAD at its
/// next turn opens a round against the healthy leader. L-turn catches it; the catching
/// seed is asserted, and that it passes without the breakage.
#[test]
fn negative_control_first_sparse_targeted() {
    let broken = Breakage {
        sabotage: Sabotage {
            first_sparse_targeted: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_first_sparse_targeted",
        "first sparse LEAD targeted",
        &broken,
        &["L-turn"],
        FIRST_SPARSE_TARGETED_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::first_sparse_targeted`
/// (235 of the 10,000 default seeds): leader 1 of 5, K = 3; the first sparse LEAD
/// (seq 262, naming 2 and 3) went to them alone, the next one's copy to 4 was lost, and
/// 4's timer, at the faith of the dense LEAD 261, opened a round before LEAD 264.
const FIRST_SPARSE_TARGETED_SEED: u64 = 103;

/// A drain's write holds every later datagram again (`Sabotage::drain_write_holds_sends`,
/// the rule before the drain left the datagrams alone): a drained leader whose state
/// disk stalls stops its heartbeats, its lease runs out, and the planned handover
/// becomes a failover. Before L-drain the default swarm with it found no violation and
/// no liveness failure; L-drain does. The catching seed is asserted, and
/// that it passes without the breakage.
#[test]
fn negative_control_drain_write_holds_sends() {
    let broken = Breakage {
        sabotage: Sabotage {
            drain_write_holds_sends: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_drain_write_holds_sends",
        "drain write holds sends",
        &broken,
        &["L-drain"],
        DRAIN_WRITE_HOLDS_SENDS_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::drain_write_holds_sends`
/// (4,291 of the 10,000 default seeds, `SWARM_COUNT=1`, of 6,403 episodes; about as
/// many pass as the 2,073 whose stall begins just after the drain, when its write is
/// already in flight and lands on time): leader 1 of 3, hold 768 ms, drained with its
/// disk stalled from just before; server 2 led 855 ms later, against a bound of
/// 108 ms.
const DRAIN_WRITE_HOLDS_SENDS_SEED: u64 = 2;

/// A reload's longer timers take effect at once again (`Sabotage::reload_holds_sends`,
/// the rule before they waited for their hold on disk): the first LEAD with the longer
/// hold waits for the leader's stalled disk and holds every later one, and the lease
/// lapses. Before L-reload the default swarm with it found no violation and no
/// liveness failure (the disk never stalled at a reload). The catching seed is
/// asserted, and that it passes without the breakage.
#[test]
fn negative_control_reload_holds_sends() {
    let broken = Breakage {
        sabotage: Sabotage {
            reload_holds_sends: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_reload_holds_sends",
        "reload holds sends",
        &broken,
        &["L-reload"],
        RELOAD_HOLDS_SENDS_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::reload_holds_sends`
/// (6,332 of the 10,000 default seeds, `SWARM_COUNT=1`): leader 2, its disk stalled at
/// 37,130 ms for 7.0 s, every server reloaded among longer timers (heartbeat 381 ms,
/// 571 ms, 381 ms again); its lease reached only 37,847 ms, and 3 was elected at
/// 37,851 ms. (Before the sequences, seed 2 caught it with one reload, at 37,466 ms.)
/// In the sequences that reload back, 339 seeds tripped `check_durable_for` (or
/// "S2-disk") first: a LEAD held for the longer hold's write left once a later write
/// had lowered the hold. A false positive of both checks, not a safety breakage: the
/// LEAD's faith was counted when it was built, and the promise shrank only once that
/// faith had run down to within the lower hold, so the lower hold on disk covered all
/// that was still owed (seed 56: a lone leader's lease, counted from a held LEAD of
/// 906 ms, with 402 ms on disk after a reload back; seed 3500: a server elected by the
/// others while it still had faith in a former leader, freed by `step_down`). Both
/// checks now ask only what is owed (the invariant `min(hold, promise)`, as for an
/// ACK; S2-disk nothing of a lone server, nor below a term it was elected in): no
/// default seed trips either under this sabotage.
const RELOAD_HOLDS_SENDS_SEED: u64 = 2;

/// The hold measured against the disk's now again (`Sabotage::disk_hold_bound`, the rule
/// before the second review's `min_hold_pending`): a leader at a longer hold on disk,
/// reloaded back to shorter timers on a stalled disk (its promise shrinks with a write
/// that holds nothing and stalls) and then up to the longer again, applies those at
/// once as covered by the disk, and its first LEAD of the longer hold waits for the
/// stalled writes and holds every later one: the lease lapses. Before
/// `ReloadShape::BackToDisk` the default swarm with it found no violation and no
/// liveness failure (only tests/reload_stall_adversary.rs's D1 test did). The catching
/// seed is asserted, and that it passes without the breakage.
#[test]
fn negative_control_disk_hold_bound() {
    let broken = Breakage {
        sabotage: Sabotage {
            disk_hold_bound: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_disk_hold_bound",
        "disk hold bound",
        &broken,
        &["L-reload"],
        DISK_HOLD_BOUND_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::disk_hold_bound`
/// (1,538 of the 10,000 default seeds, `SWARM_COUNT=1`, of the D1 sequences alone):
/// leader 2 at heartbeat 385 ms with that hold on disk, its disk stalled at 77,866 ms
/// for 3.6 s, every server reloaded back to 250 ms and, 1,475 ms after the stall, up to
/// 385 ms again; its lease reached only 79,659 ms, and 1 was elected then.
const DISK_HOLD_BOUND_SEED: u64 = 4;

/// A write that only lowers the hold holds every later datagram again
/// (`Sabotage::lowering_write_holds`, the rule before "a shorter hold holds nothing"):
/// a stalled leader reloaded to longer timers and back (or among longer ones) shrinks
/// its promise with a write that waits for the disk, and its heartbeats wait with it:
/// the lease lapses. Before `ReloadShape::Back`, `Among` and `BackToDisk` the default
/// swarm with it found no violation and no liveness failure (only
/// tests/reload_stall_adversary.rs did). The catching seed is asserted, and that it
/// passes without the breakage.
#[test]
fn negative_control_lowering_write_holds() {
    let broken = Breakage {
        sabotage: Sabotage {
            lowering_write_holds: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_lowering_write_holds",
        "lowering write holds",
        &broken,
        &["L-reload"],
        LOWERING_WRITE_HOLDS_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::lowering_write_holds`
/// (4,738 of the 10,000 default seeds, `SWARM_COUNT=1`, of the three sequences that
/// reload back): leader 2, its disk stalled at 37,466 ms for 5.2 s, every server
/// reloaded among longer timers (heartbeat 341 ms, 472 ms, 341 ms again); its lease
/// reached only 39,452 ms, and 3 was elected at 40,611 ms.
const LOWERING_WRITE_HOLDS_SEED: u64 = 2;

/// A restarted server sheds the hold promise it read from disk at the first shorter
/// LEAD (`Sabotage::restart_sheds_promise`), though what it acknowledged before the
/// crash may still be owed it until its quiet period ends: a second crash once that
/// write lands leaves a quiet period shorter than a lease it vouched for. Only
/// "S2-disk" (`sim/durable.rs`, the simulator's own model of the disk) sees it; it
/// found the rule (22 of the 10,000 default seeds before it). The catching seed is
/// asserted, and that it passes without the breakage.
#[test]
fn negative_control_restart_sheds_promise() {
    let broken = Breakage {
        sabotage: Sabotage {
            restart_sheds_promise: true,
            ..Sabotage::default()
        },
        ..Breakage::default()
    };
    caught_at(
        "negative_control_restart_sheds_promise",
        "restart sheds promise",
        &broken,
        &["S2-disk"],
        RESTART_SHEDS_PROMISE_SEED,
        true,
    );
}

/// The first default seed at which the swarm catches `Sabotage::restart_sheds_promise`.
const RESTART_SHEDS_PROMISE_SEED: u64 = 656;
