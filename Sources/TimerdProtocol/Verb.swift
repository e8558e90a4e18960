import TimerdCore

/// The request verbs, spelled on the wire as their upper-case raw values and matched
/// ASCII-case-insensitively. Adding a verb is one `case` line. What each verb does is defined by the
/// daemon, not by this codec.
public enum Verb: String, Sendable, Hashable, CaseIterable {
    /// `PING` on the wire.
    case ping = "PING"
    /// `VERSION` on the wire.
    case version = "VERSION"
    /// `HELP` on the wire.
    case help = "HELP"
    /// `ADD` on the wire.
    case add = "ADD"
    /// `EXEC` on the wire.
    case exec = "EXEC"
    /// `CANCEL` on the wire.
    case cancel = "CANCEL"
    /// `PAUSE` on the wire.
    case pause = "PAUSE"
    /// `RESUME` on the wire.
    case resume = "RESUME"
    /// `RUN` on the wire.
    case run = "RUN"
    /// `LIST` on the wire.
    case list = "LIST"
    /// `SHOW` on the wire.
    case show = "SHOW"
    /// `RELOAD` on the wire.
    case reload = "RELOAD"
    /// `MODE` on the wire.
    case mode = "MODE"
    /// `STATS` on the wire.
    case stats = "STATS"
    /// `WATCH` on the wire.
    case watch = "WATCH"
    /// `NEXT` on the wire.
    case next = "NEXT"
    /// `HISTORY` on the wire.
    case history = "HISTORY"
    /// Cluster mode: the members and their jobs, this node's role and etcd's health (`docs/cluster.md`).
    case cluster = "CLUSTER"
    /// A job's last due fires and what became of each (`WHY NAME [limit=N]`).
    case why = "WHY"

    /// Looks a verb up by its spelling, ignoring ASCII case only (`ping`, `Ping` and `PING` are the same;
    /// non-ASCII look-alikes such as a dotless `ı` never match). Returns nil for an unknown verb.
    public init?(word: String) {
        var upper: [UInt8] = []
        upper.reserveCapacity(word.utf8.count)
        for b in word.utf8 {
            upper.append((UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) ? b - 0x20 : b)
        }
        self.init(rawValue: String(decoding: upper, as: UTF8.self))
    }
}
