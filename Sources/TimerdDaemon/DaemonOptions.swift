import TimerdCore
import TimerdConfig
import TimerdSystem

/// `timerd`'s command line.
struct DaemonOptions {
    var socket: String?
    var config: String?
    var stateDirectory: String?
    var checkConfig = false
    var showVersion = false
    var showHelp = false

    static let defaultConfig = "/etc/timerd/timerd.conf"

    static let usage = """
        Usage: timerd [--socket PATH] [--config PATH] [--state-dir PATH] [--check-config]
               timerd --version | --help

        Runs the timer daemon in the foreground: a registry of timers that fire shell commands,
        driven over a Unix socket by `timerctl`. Logs go to stderr.

        Options:
          --socket PATH    control socket (default: $TIMERD_SOCKET, then [daemon] socket in the config,
                           then /run/timerd/timerd.sock for root, $XDG_RUNTIME_DIR/timerd/timerd.sock otherwise)
          --config PATH    config file (default /etc/timerd/timerd.conf; a missing default is not an error)
          --state-dir PATH where jobs added at run time and run history are kept (default: $STATE_DIRECTORY,
                           then /var/lib/timerd for root, $XDG_STATE_HOME/timerd otherwise)
          --check-config   validate the config and exit: 0 if valid, 1 with file:line: message per problem
          --version        print the version and exit
          --help           print this help and exit

        Signals: SIGTERM/SIGINT stop gracefully, SIGHUP reloads the config.
        Docs: README.md and docs/ in the source tree.
        """

    /// The options `parse` knows (its `switch`), for suggestions.
    private static let flags = ["--socket", "--config", "--state-dir", "--check-config", "--version", "--help"]

    /// " (did you mean --check-config?)" for an unknown option that starts one option (`--check`) or is a
    /// typo or two from one (`--confg`), or nothing.
    private static func suggestion(for flag: String) -> String {
        let starting = flags.filter { $0.hasPrefix(flag) }
        if flag.count > 3, starting.count == 1 { return " (did you mean \(starting[0])?)" }
        guard let near = flags.first(where: { KeySuggestion.editDistance($0, flag) <= 2 }) else { return "" }
        return " (did you mean \(near)?)"
    }

    /// Parses `arguments` (without the program name). Throws a message for a usage error.
    static func parse(_ arguments: [String]) throws(UsageError) -> DaemonOptions {
        var options = DaemonOptions()
        var index = 0
        func value(for flag: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else { throw UsageError("\(flag) needs a value") }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            var flag = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            switch flag {
            case "--socket": options.socket = try value(for: flag, inline: inline)
            case "--config": options.config = try value(for: flag, inline: inline)
            case "--state-dir": options.stateDirectory = try value(for: flag, inline: inline)
            case "--check-config": options.checkConfig = true
            case "--version": options.showVersion = true
            case "--help", "-h": options.showHelp = true
            default:
                throw UsageError(argument.hasPrefix("-")
                                 ? "unknown option \(argument)\(suggestion(for: flag))" : "unexpected argument \(argument)")
            }
            index += 1
        }
        if options.socket?.isEmpty == true { throw UsageError("--socket needs a path") }
        if options.config?.isEmpty == true { throw UsageError("--config needs a path") }
        if options.stateDirectory?.isEmpty == true { throw UsageError("--state-dir needs a path") }
        return options
    }

    /// The default socket path for this user: `/run/timerd/timerd.sock` for root, else under
    /// `$XDG_RUNTIME_DIR` (falling back to `/tmp/timerd-UID` when that is unset).
    static func defaultSocket() -> String {
        if CurrentProcess.userID == 0 { return "/run/timerd/timerd.sock" }
        if let runtime = CurrentProcess.environmentVariable("XDG_RUNTIME_DIR"), !runtime.isEmpty {
            return runtime + "/timerd/timerd.sock"
        }
        return "/tmp/timerd-\(CurrentProcess.userID)/timerd.sock"
    }
}

extension DaemonOptions {
    /// The default state directory: systemd's `StateDirectory=` (`$STATE_DIRECTORY`, its first entry),
    /// else `/var/lib/timerd` for root, else `$XDG_STATE_HOME/timerd` (`~/.local/state/timerd`).
    static func defaultStateDirectory() -> String {
        if let fromSystemd = CurrentProcess.environmentVariable("STATE_DIRECTORY"),
           let first = fromSystemd.split(separator: ":").first, !first.isEmpty {
            return String(first)
        }
        if CurrentProcess.userID == 0 { return "/var/lib/timerd" }
        if let state = CurrentProcess.environmentVariable("XDG_STATE_HOME"), state.hasPrefix("/") {
            return state + "/timerd"
        }
        return (CurrentProcess.environmentVariable("HOME") ?? "/tmp") + "/.local/state/timerd"
    }
}

struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
