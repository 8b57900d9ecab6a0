// Package demo runs simulated sensor publishers on loopback for `slogfeed
// serve --demo`, so adaptive scheduling can be watched on a machine with no
// network.
//
// The publishers are a second slogfeed sensor store (its own data file in a
// temporary directory) on 127.0.0.1 at a free port, fed by simulated sensors
// from the publishing model of schedule/sim. Time is compressed: periods
// that would be minutes in the field are seconds here, and so is the
// desynchronisation interval the publishers advertise (demoDesyncBase).
//
//   - lab-temperature: every 5 s, Laplace jitter b = 0.2 s, lost readings
//     (p_ss 0.95, p_fs 0.8); subscribed twice, with auto (.rss) and with
//     fixed 5 s polling (.atom), to compare them side by side;
//   - greenhouse-humidity: every 7 s, b = 0.5 s, p_ss 0.9, p_fs 0.7;
//   - river-level: every 10 s, a clock 2% fast (drift);
//   - buoy-dtn: a disruption-tolerant buoy, a reading every 3 s; for 40 s
//     of each minute its link is up and readings go out live, for the
//     other 20 s they are held and delivered in one batch when the link
//     comes back (bimodal);
//   - night-owl: a plain RSS feed that declares the hour the demo started
//     in <skipHours>: slogfeed fetches it once, learns the sleep plan and
//     does not poll it again until the next hour;
//   - ulb-mote-20: a real sensor trace (mote 20 of the ULB sensorNet
//     Library 1 deployment, temperature, a reading about every 60 s with
//     real jitter and losses) served as a plain file and replayed 12
//     times faster by the "ulb" source adapter (plugins/ulb).
package demo
