import TimerdCore
import TimerdProtocol
import TimerdSystem

/// What timerctl prints for one outcome, and the status it exits with.
package struct Rendered: Equatable, Sendable {
    package var stdout: String
    package var stderr: String
    package var status: Int32

    package init(stdout: String = "", stderr: String = "", status: Int32 = ExitStatus.success) {
        self.stdout = stdout
        self.stderr = stderr
        self.status = status
    }
}

/// Turns timerd's reply into timerctl's output. Pure: "now" and the local zone are passed in.
///
/// `ERR` → `timerctl: <message> (<code>)` on stderr, status 1. `OK` → per verb: nothing for add, cancel,
/// pause and resume (with `--tag`: the jobs acted on, one per line, or a note on stderr when there were
/// none); `pong`; the generated name (exec); the run status (run); the table (list); the block (show);
/// the runs table (history); a summary line (reload); the mode and its held or released jobs (mode);
/// the counters block (stats); the cluster block (cluster); the daemon's version line (version); one fire time per line (next,
/// computed by timerctl itself and rendered as if timerd had replied). With `--json` the payload is printed as received, one
/// line. A payload that does not decode is printed raw.
package enum ReplyFormatter {
    /// timerctl's own version, shown by `version`.
    package static let clientVersion = "0.1.0"
    /// The protocol version timerctl speaks.
    package static let protocolVersion = 1

    /// `localZone` gives the zone `history` and `why` print their times in (asked for only by them).
    package static func render(
        _ reply: Reply, for command: Command, now: WallTime, localZone: () -> ZoneRules = { SystemTimeZones.systemZone() }
    ) -> Rendered {
        switch reply {
        case .err(let code, let message):
            let text = message.isEmpty ? "timerctl: \(code)\n" : "timerctl: \(message) (\(code))\n"
            return Rendered(stderr: text, status: ExitStatus.daemonError)
        case .ok(let payload):
            if command.output == .text, let tag = command.taggedAction, let payload,
                let result = try? Payload.decode(TagResult.self, from: payload), result.jobs.isEmpty
            {
                return Rendered(stderr: "timerctl: no jobs with tag \(tag)\n")
            }
            return Rendered(stdout: success(payload, for: command, now: now, localZone: localZone))
        }
    }

    /// The line `version` prints before asking the daemon.
    package static var clientVersionLine: String { "timerctl \(clientVersion) (protocol \(protocolVersion))\n" }

    private static func success(_ payload: String?, for command: Command, now: WallTime, localZone: () -> ZoneRules) -> String {
        if command.verb == .ping { return "pong\n" }
        guard let payload else { return "" }
        if command.output == .json {
            if command.verb == .version {
                return "{\"client\":{\"version\":\"\(clientVersion)\",\"protocol\":\(protocolVersion)},\"daemon\":\(payload)}\n"
            }
            return payload + "\n"
        }
        let text: String?
        switch command.verb {
        case .exec: text = (try? Payload.decode(ExecReply.self, from: payload)).map { $0.name + "\n" }
        case .run: text = (try? Payload.decode(RunReply.self, from: payload)).map { $0.status + "\n" }
        case .list: text = (try? Payload.decode([JobInfo].self, from: payload)).map { JobInfoText.table($0, now: now) }
        case .show: text = (try? Payload.decode(JobInfo.self, from: payload)).map { JobInfoText.detail($0, now: now) }
        case .history:
            text = (try? Payload.decode([RunRecord].self, from: payload)).map { HistoryText.table($0, now: now, zone: localZone()) }
        case .why:
            text = (try? Payload.decode([DueFire].self, from: payload)).map { WhyText.table($0, now: now, zone: localZone()) }
        case .reload: text = (try? Payload.decode(ReloadReply.self, from: payload)).map { reloadSummary($0) + "\n" }
        case .version: text = (try? Payload.decode(VersionReply.self, from: payload)).map { "timerd \($0.version) (protocol \($0.protocol))\n" }
        case .mode: text = (try? Payload.decode(ModeInfo.self, from: payload)).map { modeText($0, now: now) }
        case .stats: text = (try? Payload.decode(DaemonStats.self, from: payload)).map(StatsText.block)
        case .cluster: text = (try? Payload.decode(ClusterInfo.self, from: payload)).map(ClusterText.block)
        case .next: text = (try? Payload.decode(NextTimes.self, from: payload)).map { $0.times.map { $0 + "\n" }.joined() }
        case .cancel, .pause, .resume:
            guard command.taggedAction != nil else { return "" }
            text = (try? Payload.decode(TagResult.self, from: payload)).map { $0.jobs.map { $0 + "\n" }.joined() }
        case .add, .ping, .watch, .simulate, .import, .help: return ""
        }
        return text ?? payload + "\n"
    }

    /// `reloaded: 1 added (x), 0 changed, 2 removed (a, b), 3 unchanged`.
    static func reloadSummary(_ reply: ReloadReply) -> String {
        func part(_ names: [String], _ label: String) -> String {
            names.isEmpty ? "0 \(label)" : "\(names.count) \(label) (\(names.joined(separator: ", ")))"
        }
        return "reloaded: \(part(reply.added, "added")), \(part(reply.changed, "changed")), "
            + "\(part(reply.removed, "removed")), \(reply.unchanged) unchanged"
    }

    /// `mode: default` and a `held: NAME (since TIME, 3m ago)` line per held job (or `held: none`); after a
    /// switch `mode: NEW (was OLD)`, then a `released: NAME` line per released job and the held lines, if any.
    package static func modeText(_ info: ModeInfo, now: WallTime) -> String {
        var lines: [String] = []
        if let previous = info.previous {
            lines.append("mode: \(info.mode) " + (previous == info.mode ? "(unchanged)" : "(was \(previous))"))
            lines += (info.released ?? []).map { "released: \($0)" }
        } else {
            lines.append("mode: \(info.mode)")
            if info.held.isEmpty { lines.append("held: none") }
        }
        for held in info.held {
            let relative = TimeText.relative(held.since, now: now)
            lines.append("held: \(held.name) (since \(held.since)" + (relative == held.since ? ")" : ", \(relative))"))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: Payload shapes (see ControlHandler in the daemon)

    struct ExecReply: Decodable { var name: String }
    struct RunReply: Decodable { var status: String }

    struct ReloadReply: Decodable {
        var added: [String]
        var changed: [String]
        var removed: [String]
        var unchanged: Int
    }

    /// `{"version":"0.1.0","protocol":"1"}`; `protocol` may also be a number.
    struct VersionReply: Decodable {
        var version: String
        var `protocol`: String

        enum CodingKeys: String, CodingKey { case version, `protocol` }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            version = try container.decode(String.self, forKey: .version)
            if let number = try? container.decode(Int.self, forKey: .protocol) {
                `protocol` = String(number)
            } else {
                `protocol` = try container.decode(String.self, forKey: .protocol)
            }
        }
    }
}
