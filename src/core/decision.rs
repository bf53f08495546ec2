//! The decision of a round (SPEC section 5, "Decision"): a pure function from the
//! slate and what this server knows (its live leader, its vote, the quiet period) to a
//! vote or an abstention. The node gathers its input in `finish_round`.

use super::*;

/// Everything a decision depends on, gathered by the node.
#[derive(Debug)]
pub struct DecisionInput<'a> {
    /// The claims of this round, own included.
    pub slate: &'a Slate,
    /// Majority of the configured servers.
    pub quorum: usize,
    /// Per server position: configured as a witness (never eligible).
    pub witness: &'a [bool],
    /// Per server position: its id (smallest id breaks the last tie).
    pub ids: &'a [u16],
    /// Still within the startup quiet period.
    pub quiet: bool,
    /// The current leader's position, when it was heard within its hold.
    pub live_leader: Option<usize>,
    /// The highest term this server voted in, and for whom (position).
    pub voted: (u64, Option<usize>),
    /// Test-only: ignore the heard-count eligibility rule.
    pub ignore_heard: bool,
    /// Test-only: rank claimants without their priority (issue 22's negative control).
    pub unranked: bool,
    /// The successor named by the RESIGN that opened this round (SPEC section 14).
    pub successor: Option<usize>,
    /// This round follows a resignation (this server's, or its leader's RESIGN opened
    /// it): no last resort in it. The resigner claims INELIGIBLE for this round only and
    /// may well be fit: a yield with no other fit server must not hand the seat to an
    /// unhealthy one. The next round, 2-3 RTT later, has no such claim.
    pub after_resign: bool,
}

/// Why a server cast no vote in a round.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Abstain {
    /// Fewer than a majority of servers made claims.
    NoMajority,
    /// The startup quiet period has not passed.
    Quiet,
    /// The live leader made no eligible claim.
    LeaderIneligible,
    /// No claimant is eligible.
    NoEligible,
    /// Already voted in this term (or a later one) for someone else.
    AlreadyVoted,
}

/// The outcome of a round at one server.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Vote for the server at position `candidate` in `term`.
    Vote {
        /// The election term E.
        term: u64,
        /// Position of the chosen server.
        candidate: usize,
    },
    /// Cast no vote.
    Abstain(Abstain),
}

fn eligible(input: &DecisionInput<'_>, idx: usize) -> bool {
    input
        .slate
        .get(idx)
        .is_some_and(|c| c.could_be_chosen(input.witness[idx], input.quorum, input.ignore_heard))
}

/// The order of claimants: the newest term seen, then priority, then smallest id (the
/// claimant at `i` has a claim).
fn rank(input: &DecisionInput<'_>, i: usize) -> (u64, u8, std::cmp::Reverse<u16>) {
    let c = input.slate.get(i).expect("ranked claimants have a claim");
    let priority = if input.unranked { 0 } else { c.priority };
    (c.last.0, priority, std::cmp::Reverse(input.ids[i]))
}

/// Decides a round (SPEC section 5, "Decision").
pub fn decide(input: &DecisionInput<'_>) -> Decision {
    let Some(term) = input.slate.round_term() else {
        return Decision::Abstain(Abstain::NoMajority);
    };
    if input.slate.len() < input.quorum {
        return Decision::Abstain(Abstain::NoMajority);
    }
    if input.quiet {
        return Decision::Abstain(Abstain::Quiet);
    }
    let choice = match input.live_leader {
        // A server never votes for anyone else within the hold of hearing the leader:
        // the leader's lease rests on it.
        Some(l) if eligible(input, l) => l,
        Some(_) => return Decision::Abstain(Abstain::LeaderIneligible),
        // A resigning leader named its successor: chosen when it claims, eligible.
        None if input.successor.is_some_and(|p| eligible(input, p)) => {
            input.successor.expect("checked")
        }
        None => {
            // The newest term seen, then priority, then smallest id. Not the seq: a
            // RESIGN advances it, and the servers that heard the RESIGN before the
            // others' claims would outrank priority (issue 11).
            let best = (0..input.ids.len())
                .filter(|&i| eligible(input, i))
                .max_by_key(|&i| rank(input, i));
            // No eligible claimant and no live leader: the best unhealthy claimant, as a
            // last resort (SPEC section 13), so that a fault every server shares never
            // leaves the cluster leaderless. It hands over as soon as a fit server is
            // known. Drained, stopping and resigning servers never claim it.
            let last_resort = || {
                (0..input.ids.len())
                    .filter(|&i| {
                        input.slate.get(i).is_some_and(|c| {
                            c.could_be_last_resort(
                                input.witness[i],
                                input.quorum,
                                input.ignore_heard,
                            )
                        })
                    })
                    .max_by_key(|&i| rank(input, i))
            };
            let last_resort = || last_resort().filter(|_| !input.after_resign);
            match best.or_else(last_resort) {
                Some(i) => i,
                None => return Decision::Abstain(Abstain::NoEligible),
            }
        }
    };
    let (voted_term, voted_for) = input.voted;
    if term > voted_term || (term == voted_term && voted_for == Some(choice)) {
        Decision::Vote {
            term,
            candidate: choice,
        }
    } else {
        Decision::Abstain(Abstain::AlreadyVoted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(term: u64, candidate: usize) -> Decision {
        Decision::Vote { term, candidate }
    }

    fn claim(term: u64, last: (u64, u64), heard: u8) -> Claim {
        Claim {
            term,
            last,
            priority: 0,
            heard,
            ineligible: false,
            last_resort: false,
        }
    }

    struct Fixture {
        slate: Slate,
        witness: Vec<bool>,
        ids: Vec<u16>,
    }

    impl Fixture {
        fn new(n: usize) -> Fixture {
            Fixture {
                slate: Slate::new(n),
                witness: vec![false; n],
                ids: (1..=n as u16).collect(),
            }
        }
        fn input(&self) -> DecisionInput<'_> {
            DecisionInput {
                slate: &self.slate,
                quorum: self.ids.len() / 2 + 1,
                witness: &self.witness,
                ids: &self.ids,
                quiet: false,
                live_leader: None,
                voted: (0, None),
                ignore_heard: false,
                unranked: false,
                successor: None,
                after_resign: false,
            }
        }
    }

    #[test]
    fn abstains_without_a_majority_slate() {
        let mut f = Fixture::new(5);
        f.slate.record(0, claim(3, (2, 9), 5));
        f.slate.record(1, claim(3, (2, 9), 5));
        assert_eq!(decide(&f.input()), Decision::Abstain(Abstain::NoMajority));
        f.slate.record(2, claim(2, (1, 1), 5));
        assert_eq!(decide(&f.input()), vote(3, 0));
    }

    #[test]
    fn picks_newest_term_then_priority_then_smallest_id() {
        let mut f = Fixture::new(3);
        f.slate.record(0, claim(4, (1, 9), 3));
        f.slate.record(1, claim(4, (2, 5), 3));
        f.slate.record(2, claim(5, (2, 7), 3));
        // Newest term 2 ties between 1 and 2 (the seq does not rank: a RESIGN advances
        // it): smallest id wins; E is the highest claim.
        assert_eq!(decide(&f.input()), vote(5, 1));
        let mut c = *f.slate.get(2).unwrap();
        c.priority = 9;
        f.slate.record(2, c);
        assert_eq!(decide(&f.input()), vote(5, 2));
    }

    #[test]
    fn a_named_successor_wins_when_eligible_and_only_then() {
        let mut f = Fixture::new(3);
        f.slate.record(0, claim(4, (2, 5), 3));
        f.slate.record(1, claim(4, (2, 5), 3));
        let mut c = claim(4, (2, 5), 3);
        c.priority = 9;
        f.slate.record(2, c);
        let mut i = f.input();
        i.successor = Some(1);
        assert_eq!(decide(&i), vote(4, 1), "over a higher priority");
        // Ineligible or absent: the usual choice.
        let mut c = *f.slate.get(1).unwrap();
        c.ineligible = true;
        f.slate.record(1, c);
        let mut i = f.input();
        i.successor = Some(1);
        assert_eq!(decide(&i), vote(4, 2));
        let mut f = Fixture::new(3);
        f.slate.record(0, claim(4, (2, 5), 3));
        f.slate.record(2, claim(4, (2, 5), 3));
        let mut i = f.input();
        i.successor = Some(1);
        assert_eq!(decide(&i), vote(4, 0));
        // Never over a live leader.
        i.live_leader = Some(2);
        assert_eq!(decide(&i), vote(4, 2));
    }

    #[test]
    fn heard_count_witness_and_ineligible_flag_exclude() {
        let mut f = Fixture::new(3);
        f.slate.record(0, claim(4, (9, 9), 1)); // newest, but heard only itself
        f.slate.record(1, claim(4, (2, 7), 2));
        f.slate.record(2, claim(4, (2, 8), 3));
        f.witness[2] = true;
        assert_eq!(decide(&f.input()), vote(4, 1));
        let mut i = f.input();
        i.ignore_heard = true;
        assert_eq!(decide(&i), vote(4, 0));
        let mut c = *f.slate.get(1).unwrap();
        c.ineligible = true;
        f.slate.record(1, c);
        assert_eq!(decide(&f.input()), Decision::Abstain(Abstain::NoEligible));
    }

    #[test]
    fn live_leader_is_sticky_and_votes_are_never_changed() {
        let mut f = Fixture::new(3);
        f.slate.record(0, claim(4, (3, 1), 3));
        let mut c1 = claim(4, (3, 9), 3);
        c1.priority = 1;
        f.slate.record(1, c1);
        let mut i = f.input();
        i.live_leader = Some(0);
        assert_eq!(decide(&i), vote(4, 0));
        i.live_leader = Some(2); // live leader made no claim
        assert_eq!(decide(&i), Decision::Abstain(Abstain::LeaderIneligible));
        i.live_leader = None;
        i.voted = (4, Some(0));
        assert_eq!(decide(&i), Decision::Abstain(Abstain::AlreadyVoted));
        i.voted = (4, Some(1));
        assert_eq!(decide(&i), vote(4, 1), "a resend is allowed");
        i.voted = (5, Some(1));
        assert_eq!(decide(&i), Decision::Abstain(Abstain::AlreadyVoted));
        i.voted = (0, None);
        i.quiet = true;
        assert_eq!(decide(&i), Decision::Abstain(Abstain::Quiet));
    }

    /// SPEC 13: with no eligible claimant and no live leader, the best unhealthy
    /// claimant that may be a last resort (same order as eligible ones); never over an
    /// eligible one, never one that hears too few or is a witness, never over a live
    /// leader, and not in the round a resignation opened.
    #[test]
    fn a_last_resort_only_when_nobody_eligible_claims() {
        let lr = |term, last, heard, priority| {
            let mut c = claim(term, last, heard);
            c.ineligible = true;
            c.last_resort = true;
            c.priority = priority;
            c
        };
        let mut f = Fixture::new(3);
        f.slate.record(0, lr(4, (2, 5), 3, 1));
        f.slate.record(1, lr(4, (2, 5), 3, 5));
        let mut drained = claim(4, (2, 5), 3);
        drained.ineligible = true;
        f.slate.record(2, drained);
        assert_eq!(decide(&f.input()), vote(4, 1), "the higher priority");
        // An eligible claimant always wins over a last resort.
        f.slate.record(2, claim(4, (1, 1), 3));
        assert_eq!(decide(&f.input()), vote(4, 2));
        f.slate.record(2, drained);
        // Not over a live leader, not after a resignation.
        let mut i = f.input();
        i.live_leader = Some(2);
        assert_eq!(decide(&i), Decision::Abstain(Abstain::LeaderIneligible));
        let mut i = f.input();
        i.after_resign = true;
        assert_eq!(decide(&i), Decision::Abstain(Abstain::NoEligible));
        // A last resort that hears too few, or is a witness, is none.
        let mut f = Fixture::new(3);
        f.slate.record(0, lr(4, (2, 5), 3, 1));
        f.slate.record(1, lr(4, (2, 5), 1, 5));
        assert_eq!(decide(&f.input()), vote(4, 0));
        f.witness[0] = true;
        assert_eq!(decide(&f.input()), Decision::Abstain(Abstain::NoEligible));
    }
}
