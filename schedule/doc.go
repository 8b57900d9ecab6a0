// Package schedule decides when slogfeed fetches each feed.
//
// A Policy maps what polls of one feed have observed to the time of its
// next poll. Policies are deterministic state machines: they never read the
// wall clock or globals, they are told the poll time in Observation.At, and
// randomness (only the desynchronisation offset) comes from a seeded source
// of their own. The very same code therefore runs live, in the simulator
// (schedule/sim) and in `slogfeed eval` (schedule/eval), where months of
// polling take seconds.
//
// # Policies
//
//   - NewDPT(DPTA|DPTN|DPTL): Data Publication Tracking, Algorithms 1–2 of
//     Park & Heidemann, kept exact: they are the reference the paper's
//     figures are checked against.
//   - NewAuto: slogfeed's default policy, DPT's model with the improvements
//     the measurements called for (below).
//   - NewMDPT: Multi-source DPT (Algorithm 3) for a consumer that needs m of
//     n sources.
//   - NewFixed, NewCron: timers.
//   - NewMiniflux, NewCommaFeed, NewNewsBlur: the polling rules of today's
//     readers, written from their published behaviour.
//   - NewOracle: polls exactly at each publish; the physical limit.
//
// Policy names (used by the API and by eval): dpt-a, dpt-n, dpt-l,
// dpt-l-unimodal, bimodal-dpt-l (= dpt-l), mdpt, auto, fixed-<duration>,
// cron, miniflux, commafeed, newsblur, oracle.
//
// # DPT as implemented
//
// The paper's pseudo-code is ambiguous in places; this is the reading
// implemented and pinned by the table tests in dpt_test.go.
//
// Tracking (Algorithm 1). A publish event is a distinct publish time;
// items published within min(1 s, median/100) of each other (one batch,
// duplicates a few milliseconds apart) are one event. The history holds
// the last HistoryLen (20) gaps between events. The period estimate is
// their median. σ is the spread of the publishing jitter: the population
// standard deviation of each gap's deviation from the nearest whole
// multiple (at least one) of the median, so a gap of 2λ+j after a lost
// reading is jitter j, not an outlier of 2λ. Gaps longer than
// OutagePeriods+1 (6) medians are long outages: they are left out of σ
// and feed the bimodal history instead.
//
// Phase adjustment. Every hit rebases the clock on t_p, the publish time
// of the newest item: the publisher's phase hint if it sent one
// (At − Phase, which also shifts the other items' dates by the same
// correction), else the newest item date (never later than At). The next
// poll is t_p + median + VARIANT_BIAS·σ (−1, 0, +1 for A, N, L); when that
// has already passed (a slow fetch), the next expected publish
// t_p + k·median + bias·σ after now. When the source says more data is
// waiting the next poll is immediate. Intentional desynchronisation adds
// uniform(0, Hints.Desync) to every poll that aims at an expected publish.
//
// Retries (Algorithm 2). After a miss in FAST mode, up to
// VARIANT_FAST_TRIES (2, 1, 0) retries follow, each max(σ, 1 s) after the
// previous poll. Then PERIOD mode: retry i (i = 0…PERIOD_TRIES−1, 7 tries)
// lands on the expected publish t_p + (1+2^i)·median + bias·σ, that is
// the next period first and then exponentially further apart
// (2, 3, 5, 9, 17, 33, 65 periods after t_p). Because every retry is
// computed from t_p and not from now, the time already spent in faster
// modes is never added again: that is next_delay_bias. (A literal
// "bias = now − success time" would push period retries one period late.)
// Then BIMODAL mode, when a long gap has been seen: retry j lands on the
// expected return t_p + bimodal median + bias·σ_b and then on the
// expected publishes after it, + (2^j − 1)·median, where the bimodal
// median and σ_b are the median and spread of the last 20 long gaps.
// Without bimodal mode (WithoutBimodal, the paper's "DPT-L without
// bimodal"), the period backoff simply goes on. Every delay is capped at
// MaxDelay (2 days); expected instants already in the past are skipped.
// While no gap is known yet, the DPT variants poll DefaultInitial (5 min)
// apart, doubling after each miss (auto probes instead, below).
//
// MDPT (Algorithm 3) tracks every source with DPT-L (or another tracker,
// WithTracker), waits until the m-th earliest expected arrival among the
// sources without new data this round, polls those expected ready by then
// (plus the next-earliest up to the candidate threshold c ≥ m), re-polls
// sources already fresh when they are expected to have fresher data, and
// republishes when m have new data.
//
// With WithForecast(q) MDPT plans from its trackers' forecasts instead
// (trackers implementing Forecaster, such as Auto; others keep their own
// schedule). The rounds it serves are the publishers': a round needs m
// sources with readings newer than the newest reading the last republish
// fused. A source's planned poll is its tracker's expected publish plus
// the margin after which only a share q of publishes are still to come
// (fitted by MDPT to the source's last 128 publish gaps once it has 16;
// Auto.Margin, Auto's tail fit without its timer floor, before that), for the first
// expected publish whose poll falls after the source's last poll; a
// retry the tracker plans within that slot, or a backoff beyond it, stands.
// A source is counted on once likelySlots (2) of its expected publishes,
// plus the margin, have passed since it was last known to have nothing new
// (3 when a publish it expected before that did not come). The rendezvous
// is the m-th earliest planned poll among the sources without new data;
// sources counted on by then are not polled on their own schedule: the
// sources in doubt due by the rendezvous are polled at it one at a time,
// the one due last first, the others only once it has published; and only once
// enough of them have published are the counted-on sources needed to
// complete the round polled, at that same instant. When m sources counted
// on suffice, they are polled as soon as they are counted on. Sources with
// new data this round are not polled again.
//
// # auto, slogfeed's default
//
// The exact DPT-L polls one σ late, so under Laplace jitter it misses about
// 12% of publishes whatever the jitter's scale, and it then waits a whole
// period. Fixed-interval polling is never early, so its hit rate is the
// share of periods with a publish. auto is built to dominate fixed polling
// on both axes at once:
//
//   - Period: anchored on the 30th percentile of the gaps (with heavy
//     losses fewer than half the gaps are one period and the median
//     slips), then refined as the median of gap/k over gaps of k ≤ 6
//     periods.
//   - Batches: once the period rests on 8 gaps, a publish less than a
//     seventh of a period after the one before it (in the same hit, or
//     the batch a hit before read) is an item of a batch (a backfill of
//     stored readings, a burst of corrections), not a step of the
//     period: it is neither learned nor moves the newest publish the next
//     poll is planned from. Learned as a period, each such gap would
//     score a residual of nearly a period and pull the jitter tail out of
//     shape for hundreds of periods (a backfill of 20 readings 1.5 s
//     apart into a 60 s feed tripled its mean latency for ~700 periods).
//     The pages of a publisher saying more data is waiting are one read;
//     from the fourth hit in a row bringing such gaps they are learned:
//     the period really shrank.
//   - Cycles: a feed carrying the readings of k sensors, each a few
//     seconds after the other once a period, has k−1 short gaps and one
//     long one a cycle; the period learned is the spacing inside a group.
//     When the history shows such a cycle (every long gap at least 7
//     times every short one, at least three long ones exactly k gaps
//     apart, each the median long gap plus whole cycles within a tenth
//     of one), auto predicts each gap as the one at the same
//     place of the cycle before. Before the long gap it polls once where
//     the spacing says the next reading would come: a steady publisher
//     whose outages came at regular places looks like a cycle, and would
//     otherwise be waited for through a whole outage it no longer has.
//     After a miss it retries once just past three margins (a late
//     reading), then at the same place of each following cycle (a lost
//     group) up to the fifth miss. `slogfeed eval groups`: 2–5 sensors a
//     minute 0.5–5 s apart are fetched in a mean of 2.5–3.1 s with
//     0.7–1.7 polls a reading; polled on the spacing, as DPT-L does, they
//     wait 4.7–33 s.
//   - Two predictors, learned side by side: renewal (one period after the
//     previous publish; right for publishers whose jitter accumulates) and
//     grid (a slot grid whose anchor moves a quarter of the way to each
//     publish; right for clock-driven sensors, where one glitch must not
//     shift the next prediction). Each keeps the residuals of its own
//     predictions (the last 32) and a running scale of their upper tail
//     (over ~256 publishes, far steadier than a tail fitted to the window).
//     auto uses the predictor that needs the smaller margin; when that is
//     the grid, it polls at the later of the two instants, so a lasting
//     phase shift (which the renewal predictor follows at once) costs no
//     run of misses.
//   - Offset: the poll lands where, by an exponential tail fitted to the
//     residuals, only 1% of publishes are still to come; at least
//     min(2% of the period, 2 s) after the typical publish (timestamps
//     quantised by a coarse timer, glitches of a second: a miss costs a
//     whole period, the margin a fraction of one); and late enough for
//     the latest recent residual when that costs at most 2% of a period.
//   - Misses: auto learns why it missed. When the next hit brings a publish
//     within half a period of the missed slot the miss was "late",
//     otherwise "lost". While at least 90% of misses were late it retries
//     once, on the first miss of a run, just past the jitter tail (a retry
//     raises the hit rate only when it succeeds more often than polls do
//     in general); otherwise it retries on every
//     expected publish instant (a lost reading is most likely followed by a
//     good one) for OutagePeriods periods, then backs off exponentially.
//   - Bimodal on its own: during an outage it also polls where the long
//     (bimodal) period says the publisher returns, without waiting for
//     PERIOD_TRIES misses.
//   - Cold start: a new subscription learns from the dates of the items
//     its first fetch finds (two dated items give the period at once).
//     While no publish-to-publish gap is known, auto probes, within a
//     budget of ColdPolls (2) polls a period over the first ColdPeriods
//     (10) periods. A feed that has shown no item is probed ProbeStart
//     (2 s) after it was first found empty, then 1.3 times the time
//     waited apart. After the first item (published at t₁), the probes
//     aim at t₁ plus offsets that grow: 3 times each while below the
//     quiet time known around t₁ (the item's age when found, and the time
//     from the first empty poll to t₁: a feed empty when subscribed whose
//     first reading came u later most likely has a period over u, one
//     over x·u with probability about 1/x), then by a ratio r between 1.1
//     and 1.5 chosen so that the r/(r−1) probes such a period needs fit
//     in what is left of the budget (20 polls, less 13 kept for the
//     periods after the search, less those spent): a short period,
//     found with few polls, is probed finely, a long one coarsely. No two
//     probes are closer than ProbeStart, nor further apart than the
//     publisher's cache lifetime (Cache-Control max-age, Expires, RSS
//     <ttl>), its stated period (Hints.Period: the RSS syndication
//     module's sy:updatePeriod/sy:updateFrequency; trusted for 10 stated
//     periods of waiting, since many publishers state a default) or
//     WithInitial's limit (MaxDelay unless set). The first gap may hold a lost reading
//     (then it is two periods): unless the feed is known to have been
//     quiet for more than half of it, auto polls its middle first. While
//     a single gap is known the margin after the expected publish is at
//     least 4% of the period (no spread to go by yet), and while fewer
//     than learningResiduals (4) residuals are known, a miss at an
//     expected publish is probed for within the slot, at 1/8 of the
//     period and then at 4 times that, before the next slot: without a
//     jitter tail a slightly late publish would otherwise cost a whole
//     period. Before the tail is fitted the margin is three times the
//     spread of the gaps around whole multiples of the refined period.
//   - Date resolution: a publish dated to a whole second (as RSS, Atom
//     and HTTP dates usually are) happened somewhere in that second, so
//     the margin after the expected publish is then at least a second.
//     Below that, a publisher a fraction of a second past its dated
//     instant is polled just before every publish and each reading is
//     fetched a whole period late, every poll still a hit, which no
//     residual shows (the dates agree with the prediction).
//   - Learned sleep: a publisher quiet through the same window of every
//     day (a solar sensor at night) gets a learned daily sleep, and auto
//     moves its polls after a miss out of it, to its end (quiet.go has
//     the rules: one long gap a day on consecutive days, beginning and
//     ending within 30 minutes or two periods of the day before, agreeing
//     on LearnedSleepDays (3) days in a row; a publish near an edge moves
//     the edge, one deep inside forgets the window). The first poll after
//     a publish is never moved: the publisher may stay awake a few
//     minutes longer than the day before. WithoutSleepLearning turns it
//     off. State().LearnedSleep shows it.
//
// Measured by `slogfeed eval` (docs/evaluation.md has the tables): in the
// loss sweep (λ = 300 s, Laplace b = 10 s) auto's median latency is about
// 28% of fixed-interval polling's with the same hit rate (±0.5 point) at
// every p_ss; on the ULB sensor traces about 4% of fixed polling's median
// latency within a point of its hit rate; DPT-L gets ~13% in the sweep and
// under 0.2% on the traces but gives up 5 to 12 points of hit rate. The
// cold-start scenario measures the first 10 periods of new subscriptions
// (periods 10 s to 1 day; steady or lossy; empty or with a backlog):
// auto's mean latency is 3–18% of the period and its p90 under 40%, with
// 1.1–2.7× the polls of fixed polling at the true period (whose mean is
// about 50%). The sleep scenario measures the learned sleep.
//
// # Planned updates
//
// A publisher that knows when it will next update says so: Hints.Due (the
// Slogfeed-Due header), the delay from the response to the update it
// plans. slogfeed's pipes send it when their update follows from their
// own fetch schedule: a pipe of one input is due when that input's next
// fetch has stored what it finds, a join of twenty inputs when the last of
// the twenty still missing has (transform/runner). No statistics over past
// publishes can know this: the fused output of a join comes when its
// slowest input arrives, which moves from round to round.
//
// auto polls right at a plan (the publisher has already spread it over
// its desynchronisation interval) and keeps learning its own model from
// every hit. A plan-placed poll that finds nothing is answered with the
// publisher's next plan; after MaxPlanMisses (3) such misses in a row,
// auto ignores plans until its next hit. A plan-placed miss before auto's
// own poll was due leaves auto's own retry state alone, so falling back
// costs no publish. A publisher whose plans are wrong or made up costs a
// feed at most three extra polls per publish. The DPT variants keep to the
// paper and do not read plans (they do honour Cache-Control, which a
// planning publisher sets to the plan).
//
// # Saved state
//
// Auto, the DPT variants, Fixed and Cron implement Stateful: AppendState
// encodes what the policy has learned (histories, residuals, retry state,
// learned sleep, plans, the random source) in a compact versioned binary
// form, about 475 bytes for Auto with a day of history and at most about
// 620, about 175 for DPT, 2 for the timers; RestoreState, on a policy
// built as the saved one was, gives back a policy whose every later
// answer is the one the saved policy would have given (pinned on the real
// traces by state_test.go). slogfeed stores the state with each poll and
// restores it at start-up instead of replaying the observations.
//
// # Scheduler
//
// Scheduler runs the policies of many feeds: a priority queue of next
// fetch times, a global fetch budget and per-host concurrency limits, best-
// effort priority when more feeds are due than the budget allows, and
// sleep windows (RSS skipHours/skipDays and explicit ones) during which a
// feed is never polled; the first poll after a sleep lands at wake-up. Its
// core is clock-free for simulation; Run drives it live with a Clock.
//
// A feed's own sleep windows are set as text (ParseSleep, SleepText):
// daily "HH:MM-HH:MM" in UTC, "22:00-06:00" running over midnight, and
// one-off "START/END" in RFC 3339, comma-separated; `slogfeed add
// --sleep`, the API's "sleep" field (POST /api/v1/feeds, PUT
// /api/v1/feeds/{id}/sleep) and the UI's subscribe form take this form.
package schedule
