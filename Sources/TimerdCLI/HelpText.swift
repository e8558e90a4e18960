/// The help texts and usage hints, built from the ``CLIVerb`` table so they cannot drift from the parser.
package enum HelpText {
    /// `timerctl --help`, `timerctl help`: global usage, verbs with their abstracts, options.
    package static func global() -> String {
        var lines = [
            "Usage: timerctl [--socket PATH] [--json] VERB [ARG…]",
            "",
            "Control timerd, the timer daemon, over its Unix socket.",
            "",
            "Verbs:",
        ]
        let width = CLIVerb.allCases.map(\.rawValue.count).max() ?? 0
        for verb in CLIVerb.allCases {
            lines.append("  " + pad(verb.rawValue, width) + "  " + verb.abstract)
        }
        lines += ["", "Options:"]
        lines += table([
            (Flag.socket.synopsis, "Talk to timerd on PATH (default: see Socket below)."),
            (Flag.json.synopsis, "Print replies as JSON (exec, run, list, show, history, why, reload, mode, stats, cluster, watch, next, simulate, version, pause/resume/cancel --tag)."),
            ("-h, --help", "Show help; 'timerctl help VERB' shows a verb's options."),
        ])
        lines += [
            "",
            "Socket: --socket, else $TIMERD_SOCKET, else /run/timerd/timerd.sock for root; for other users",
            "$XDG_RUNTIME_DIR/timerd/timerd.sock (/tmp/timerd-UID/timerd.sock without XDG_RUNTIME_DIR) if it exists,",
            "else /run/timerd/timerd.sock if that exists.",
            "",
            "Exit status: 0 success, 1 timerd (or next, simulate) refused the request or import left lines out, 2 usage error, 3 cannot reach timerd.",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// `timerctl VERB --help`: usage, abstract, discussion, and every flag with a one-line description.
    package static func verb(_ verb: CLIVerb) -> String {
        if verb == .help { return global() }
        var lines = usageLines(verb)
        lines += ["", verb.abstract]
        if !verb.discussion.isEmpty { lines += [""] + verb.discussion }
        lines += ["", "Options:"]
        var rows = verb.flags.map { ($0.synopsis, $0.help) }
        if verb.hasJSONOutput { rows.append((Flag.json.synopsis, verb.jsonHelp)) }
        // `next` accepts --socket like every verb but never connects: no line for it.
        if verb.wireVerb != nil { rows.append((Flag.socket.synopsis, Flag.socket.help)) }
        rows.append(("-h, --help", "Show this help."))
        lines += table(rows)
        return lines.joined(separator: "\n") + "\n"
    }

    /// What goes to stderr for a usage error: the message, then a short usage hint.
    package static func usageError(_ error: UsageError) -> String {
        var text = "timerctl: error: \(error.message)\n"
        if error.showsGlobalHelp {
            text += "\n" + global()
        } else if let verb = error.verb, verb != .help {
            text += usageLines(verb).joined(separator: "\n") + "\n"
            text += "See 'timerctl \(verb.rawValue) --help'.\n"
        } else {
            text += "Usage: timerctl [--socket PATH] [--json] VERB [ARG…]\n"
            text += "See 'timerctl --help' for the verbs.\n"
        }
        return text
    }

    /// `Usage: timerctl …`, continuation lines aligned under the verb.
    static func usageLines(_ verb: CLIVerb) -> [String] {
        let prefix = "Usage: timerctl "
        return verb.usage.enumerated().map { index, line in
            (index == 0 ? prefix : String(repeating: " ", count: prefix.count)) + line
        }
    }

    /// Two columns: left padded to the widest entry plus two spaces.
    private static func table(_ rows: [(String, String)]) -> [String] {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { "  " + pad($0.0, width) + "  " + $0.1 }
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }
}
