import TimerdCore
import TimerdProtocol

/// What one `timerctl` invocation asks for: the result of parsing its arguments, before any I/O.
package struct Command: Equatable, Sendable {
    /// What to do.
    package enum Action: Equatable, Sendable {
        /// Print help (for one verb, or the global help for nil) on stdout and exit 0.
        case help(CLIVerb?)
        /// Send this command's request to timerd and print its reply.
        case send(ControlCommand)
        /// A command timerd would refuse with this error (a bad job name, tag, `--limit` or `--after`, found
        /// by the decoder timerd uses): print it as timerd's `ERR` would be printed (status 1), send nothing.
        case refuse(TimerdError)
        /// `next`: compute the fire times of these `NEXT` options locally (no daemon) and print them.
        case next([Option])
        /// `simulate`: run a config through the engine in virtual time (no daemon) and print its decisions.
        case simulate([Option])
        /// `import crontab`: convert this crontab file (`-`: standard input) into config text (no daemon).
        case importCrontab(path: String, [Option])
        /// `import systemd`: convert these timer units (paths or names) and their services into config text (no daemon).
        case importSystemd(units: [String], [Option])
    }

    /// How replies are printed.
    package enum OutputMode: Equatable, Sendable {
        /// Human-readable text.
        case text
        /// The daemon's JSON payload, one line (`--json`).
        case json
    }

    /// The verb given (`.help` for `timerctl --help` and `timerctl help …`).
    package var verb: CLIVerb
    package var action: Action
    package var output: OutputMode
    /// The `--socket` path, if given (resolved against the environment by ``SocketPath``).
    package var socket: String?

    package init(verb: CLIVerb, action: Action, output: OutputMode = .text, socket: String? = nil) {
        self.verb = verb
        self.action = action
        self.output = output
        self.socket = socket
    }

    /// The request to send, or nil when timerctl answers by itself.
    package var request: Request? {
        if case .send(let command) = action { return command.request }
        return nil
    }

    /// The tag of `pause`, `resume` or `cancel --tag TAG` (whose reply lists the jobs acted on), else nil.
    package var taggedAction: String? {
        guard verb == .pause || verb == .resume || verb == .cancel else { return nil }
        return request?.value("tag")
    }
}

/// A command line timerctl cannot make sense of: exit status 2, message and usage hint on stderr.
package struct UsageError: Error, Equatable, Sendable {
    /// The message, without the `timerctl: error: ` prefix.
    package var message: String
    /// The verb whose usage the hint shows; nil for the global usage.
    package var verb: CLIVerb?
    /// True to follow the message with the whole global help (no verb was given at all).
    package var showsGlobalHelp: Bool

    package init(_ message: String, verb: CLIVerb? = nil, showsGlobalHelp: Bool = false) {
        self.message = message
        self.verb = verb
        self.showsGlobalHelp = showsGlobalHelp
    }
}

/// timerctl's exit statuses.
package enum ExitStatus {
    /// The request succeeded (or help was printed).
    package static let success: Int32 = 0
    /// timerd answered `ERR`; also a value timerd's decoder refuses, found before sending, and `next`
    /// refusing a value it checks locally (same message shape).
    package static let daemonError: Int32 = 1
    /// The command line is wrong.
    package static let usage: Int32 = 2
    /// timerd cannot be reached, or closed the connection without a (valid) reply.
    package static let unreachable: Int32 = 3
}
