/// What a calendar job does with a local time that a spring-forward skips (`dst_gap=`).
public enum DSTGap: String, Equatable, Sendable, CaseIterable {
    /// Fire at the change, the first instant after the skipped interval (cron(8) for fixed-time jobs).
    case shift
    /// Do not fire for it (systemd; cron(8) for jobs with `*` in the minute or hour field).
    case skip
}

/// What a calendar job does with a local time that a fall-back repeats (`dst_repeat=`).
public enum DSTRepeat: String, Equatable, Sendable, CaseIterable {
    /// Fire at its first occurrence only (systemd; cron(8) for fixed-time jobs).
    case first
    /// Fire at its second occurrence only.
    case last
    /// Fire at both (cron(8) for jobs with `*` in the minute or hour field).
    case both
}


/// `fixed_jitter=yes`: one delay per job and host, the same at every fire and every restart, so a fleet
/// of hosts running the same job spreads out while each host keeps a steady rhythm.
public enum Jitter {
    /// A delay in [0, limit] derived from the machine id and the job's name (FNV-1a, then SplitMix64 to
    /// spread the bits). Stable across versions: changing it would move every fixed-jitter job.
    public static func fixed(machineID: String, name: String, limit: Duration) -> Duration {
        let span = UInt64(max(0, limit.nanoseconds))
        guard span > 0 else { return .zero }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array(machineID.utf8) + [0] + Array(name.utf8) {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
        hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
        hash ^= hash >> 31
        return .nanoseconds(Int64(hash % (span + 1)))
    }
}

/// What a job does with fires it missed: while timerd was not running, or handled later than its
/// `misfire_grace` (`misfire=`).
public enum MisfirePolicy: String, Equatable, Sendable, CaseIterable {
    /// Do not run them; log and count them as skipped (the default, like a systemd timer without
    /// `Persistent=`).
    case skip
    /// Run once for all of them, as soon as possible (systemd's `Persistent=yes`, anacron).
    case once
    /// Run once for each of them, in order, one after the other (at most `Limits.maximumReplays`).
    case all
}
