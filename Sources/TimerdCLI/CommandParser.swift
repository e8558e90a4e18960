import TimerdProtocol

/// Turns timerctl's arguments into a ``Command``: pure, no I/O.
///
/// Grammar: `[GLOBAL…] VERB [ARG | FLAG | GLOBAL]… [-- WORD…]`, where GLOBAL is `--socket PATH`,
/// `--socket=PATH`, `--json` or `-h`/`--help` (accepted before and after the verb). Value flags take
/// `--flag VALUE` or `--flag=VALUE`. For `add` and `exec` the words after `--` are the program to run,
/// passed verbatim; for the other verbs `--` only ends the flags (so a job may be named `-x`).
/// Checks the shape of the command line (known verb and flags, number of names, `--tag` instead of
/// names, `--owner` or `--owner-pid`), then builds the ``ControlCommand`` with timerd's own decoder,
/// which checks what timerd checks first (job and tag names, `--limit`, `--after` with `--now`); timerd
/// checks the rest (a job's options, who may do what).
package enum CommandParser {
    /// - Throws: ``UsageError`` for an unknown verb or flag, a flag without its value, or the wrong
    ///   number of names.
    package static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        var globals = Globals()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard isFlag(argument) else { break }
            index += 1
            if argument == "--" { throw UsageError("expected a verb before '--'") }
            guard try globals.consume(argument, arguments, &index, verb: nil) else {
                throw UsageError(
                    "unknown option '\(argument)'"
                        + hint(Suggestion.closest(to: flagName(argument), in: ["socket", "json", "help"]).map { "--" + $0 }))
            }
        }
        guard index < arguments.count else {
            if globals.wantsHelp { return Command(verb: .help, action: .help(nil), output: globals.output, socket: globals.socket) }
            throw UsageError("missing verb", showsGlobalHelp: true)
        }
        let word = arguments[index]
        index += 1
        guard let verb = CLIVerb(rawValue: word) else {
            throw UsageError("unknown verb '\(word)'" + hint(Suggestion.closest(to: word, in: CLIVerb.allCases.map(\.rawValue))))
        }
        // `-h`/`--help` anywhere before `--` wins over every other problem, as with swift-argument-parser.
        if globals.wantsHelp || arguments[index...].prefix(while: { $0 != "--" }).contains(where: { $0 == "-h" || $0 == "--help" }) {
            return Command(verb: verb, action: .help(verb == .help ? nil : verb), output: globals.output, socket: globals.socket)
        }
        return try parseVerb(verb, arguments[index...], globals: globals)
    }

    /// The options every verb accepts.
    private struct Globals {
        var output = Command.OutputMode.text
        var socket: String?
        var wantsHelp = false

        /// Consumes `argument` (and its value) if it is a global option; false if it is not one.
        mutating func consume(
            _ argument: String, _ arguments: [String], _ index: inout Int, verb: CLIVerb?
        ) throws(UsageError) -> Bool {
            let (name, inline) = splitFlag(argument)
            switch name {
            case "--json":
                guard inline == nil else { throw UsageError("--json takes no value", verb: verb) }
                output = .json
            case "--socket":
                let path = try value(of: "--socket PATH", inline: inline, arguments, &index, verb: verb)
                guard !path.isEmpty else { throw UsageError("--socket needs a path", verb: verb) }
                socket = path
            case "-h", "--help":
                wantsHelp = true
            default:
                return false
            }
            return true
        }
    }

    private static func parseVerb(_ verb: CLIVerb, _ arguments: ArraySlice<String>, globals: Globals) throws(UsageError) -> Command {
        var globals = globals
        let arguments = Array(arguments)
        var names: [String] = []
        var options: [Option] = []
        var words: [String] = []
        var argv: [String]?
        var given: [String] = []  // the verb's flags used, by name, in order
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                if verb.takesArgv {
                    argv = Array(arguments[index...])
                } else {
                    names += arguments[index...]
                }
                break
            }
            guard isFlag(argument) else {
                names.append(argument)
                continue
            }
            if try globals.consume(argument, arguments, &index, verb: verb) { continue }
            let (name, inline) = splitFlag(argument)
            guard name.hasPrefix("--"), let flag = verb.flags.first(where: { "--" + $0.name == name }) else {
                throw unknownFlag(name, verb: verb)
            }
            given.append(flag.name)
            switch flag.kind {
            case .value:
                options.append(Option(key: flag.key, value: try value(of: flag.synopsis, inline: inline, arguments, &index, verb: verb)))
            case .prefixedValue(_, let prefix):
                options.append(
                    Option(key: flag.key, value: prefix + (try value(of: flag.synopsis, inline: inline, arguments, &index, verb: verb))))
            case .option(let implied):
                options.append(Option(key: flag.key, value: inline ?? implied))
            case .word(let word):
                guard inline == nil else { throw UsageError("\(name) takes no value", verb: verb) }
                if !words.contains(word) { words.append(word) }
            }
        }
        if verb.takesProgram { try checkOwner(given: given, options: options, verb: verb) }
        let byTag = verb.selectsByTag && given.contains("tag")
        if byTag {
            if given.filter({ $0 == "tag" }).count > 1 {
                throw UsageError("give --tag only once (\(verb.rawValue) takes one tag)", verb: verb)
            }
            if !names.isEmpty, verb.names != .none {
                throw UsageError(verb.names == .optionalJob ? "give a job name or --tag, not both" : "give job names or --tag, not both", verb: verb)
            }
        }
        if !byTag || !names.isEmpty { try checkNames(names, verb: verb) }
        if verb == .next { return try nextCommand(given: given, options: options, globals: globals) }
        if verb == .simulate { return try simulateCommand(given: given, options: options, globals: globals) }
        if verb == .import { return try importCommand(names: names, given: given, options: options, globals: globals) }

        guard let wireVerb = verb.wireVerb else {
            // `help [VERB]`
            guard let topic = names.first else { return Command(verb: .help, action: .help(nil), output: globals.output, socket: globals.socket) }
            guard let topicVerb = CLIVerb(rawValue: topic) else {
                throw UsageError(
                    "unknown verb '\(topic)'" + hint(Suggestion.closest(to: topic, in: CLIVerb.allCases.map(\.rawValue))), verb: .help)
            }
            return Command(verb: .help, action: .help(topicVerb == .help ? nil : topicVerb), output: globals.output, socket: globals.socket)
        }
        if verb == .resume, !words.isEmpty, options.contains(where: { $0.key == "after" }) {
            throw UsageError("give either --now or --after, not both", verb: verb)
        }
        // The names are only names here (`--now` is a flag), so RESUME's are decoded with the mode apart.
        let request = Request(verb: wireVerb, positionals: names, options: options, argv: argv)
        let action: Command.Action
        do {
            let command = verb == .resume
                ? try ControlCommand(resuming: request, now: words.contains("now")) : try ControlCommand(request)
            action = .send(command)
        } catch {
            action = .refuse(error)
        }
        return Command(verb: verb, action: action, output: globals.output, socket: globals.socket)
    }

    /// `next`: one schedule, each flag at most once; NextFireQuery checks the values when it runs.
    private static func nextCommand(given: [String], options: [Option], globals: Globals) throws(UsageError) -> Command {
        let schedules = given.filter { ["cron", "calendar", "every"].contains($0) }
        if schedules.isEmpty {
            throw UsageError("give a schedule: --cron EXPR, --calendar SPEC or --every DUR", verb: .next)
        }
        if schedules.count > 1 {
            throw UsageError("give only one of --cron, --calendar and --every (got --\(schedules.joined(separator: " --")))", verb: .next)
        }
        if schedules == ["every"], let dst = given.first(where: { $0.hasPrefix("dst-") }) {
            throw UsageError("--\(dst) applies only to --cron and --calendar", verb: .next)
        }
        if let repeated = given.enumerated().first(where: { given[..<$0.offset].contains($0.element) })?.element {
            throw UsageError("give --\(repeated) only once", verb: .next)
        }
        return Command(verb: .next, action: .next(options), output: globals.output, socket: globals.socket)
    }

    /// `simulate`: --config and --until once each; the values are checked when it runs.
    private static func simulateCommand(given: [String], options: [Option], globals: Globals) throws(UsageError) -> Command {
        for required in ["config", "until"] where !given.contains(required) {
            throw UsageError("missing --\(required)", verb: .simulate)
        }
        for single in ["config", "from", "until", "seed"] where given.filter({ $0 == single }).count > 1 {
            throw UsageError("give --\(single) only once", verb: .simulate)
        }
        return Command(verb: .simulate, action: .simulate(options), output: globals.output, socket: globals.socket)
    }

    /// `import crontab [FILE|-]` or `import systemd UNIT…`: the kind first, each flag at most once.
    private static func importCommand(names: [String], given: [String], options: [Option], globals: Globals) throws(UsageError) -> Command {
        if let repeated = given.enumerated().first(where: { given[..<$0.offset].contains($0.element) })?.element {
            throw UsageError("give --\(repeated) only once", verb: .import)
        }
        if names.first == "systemd" {
            if let crontabFlag = given.first(where: { $0 == "user" || $0 == "system" }) {
                throw UsageError("--\(crontabFlag) is for import crontab", verb: .import)
            }
            return Command(verb: .import, action: .importSystemd(units: Array(names.dropFirst()), options), output: globals.output, socket: globals.socket)
        }
        if given.contains("unit-path") { throw UsageError("--unit-path is for import systemd", verb: .import) }
        return Command(verb: .import, action: .importCrontab(path: names.count > 1 ? names[1] : "-", options), output: globals.output, socket: globals.socket)
    }

    private static func checkNames(_ names: [String], verb: CLIVerb) throws(UsageError) {
        let allowed: ClosedRange<Int>
        switch verb.names {
        case .none: allowed = 0...0
        case .one: allowed = 1...1
        case .oneOrMore: allowed = 1...Int.max
        case .optionalOne, .optionalJob, .optionalTopic: allowed = 0...1
        case .importSource:
            guard let kind = names.first else { throw UsageError("missing what to import (crontab or systemd)", verb: verb) }
            switch kind {
            case "crontab": allowed = 1...2
            case "systemd":
                if names.count < 2 { throw UsageError("missing timer units (import systemd UNIT.timer…)", verb: verb) }
                allowed = 2...Int.max
            default:
                throw UsageError(
                    "cannot import '\(kind)' (timerctl imports a crontab or systemd timers: 'timerctl import crontab FILE', 'timerctl import systemd UNIT.timer')",
                    verb: verb)
            }
        }
        if names.count < allowed.lowerBound {
            if allowed.upperBound == 1 { throw UsageError("missing job name", verb: verb) }
            throw UsageError(
                verb.selectsByTag ? "missing job names (give at least one, or --tag TAG)" : "missing job names (give at least one)",
                verb: verb)
        }
        if names.count > allowed.upperBound {
            let extra = names[allowed.upperBound]
            var message = "unexpected argument '\(extra)'"
            // `every=5s` typed the config way: point at the flag.
            if let equals = extra.firstIndex(of: "="),
                let flag = verb.flags.first(where: { $0.key == Flag.key(forFlagName: String(extra[..<equals])) })
            {
                message += hint("--\(flag.name)=\(extra[extra.index(after: equals)...])")
            } else if verb.names == .one {
                message += " (\(verb.rawValue) takes one job name)"
            } else if verb.names == .none {
                message += " (\(verb.rawValue) takes no arguments)"
            } else if verb.names == .optionalOne {
                message += " (\(verb.rawValue) takes at most one mode name)"
            } else if verb.names == .importSource {
                message += " (import crontab takes one file)"
            } else if verb.names == .optionalJob {
                message += " (\(verb.rawValue) takes at most one job name, or --tag TAG)"
            }
            throw UsageError(message, verb: verb)
        }
    }

    /// `--owner` and `--owner-pid` set the same key; `--owner connection` would bind the job to this
    /// timerctl's own connection, which closes as soon as the reply is in, so the job would go at once.
    private static func checkOwner(given: [String], options: [Option], verb: CLIVerb) throws(UsageError) {
        if given.contains("owner"), given.contains(Flag.ownerPID.name) {
            throw UsageError("give either --owner or --owner-pid, not both", verb: verb)
        }
        if options.contains(Option(key: "owner", value: "connection")) {
            throw UsageError(
                "--owner connection would cancel the job as soon as timerctl exits; use --owner-pid PID to tie it to a process",
                verb: verb)
        }
    }

    private static func unknownFlag(_ name: String, verb: CLIVerb) -> UsageError {
        let candidates = verb.flags.map(\.name) + ["json", "socket", "help"]
        let suggestion = Suggestion.closest(to: flagName(name), in: candidates).map { "--" + $0 }
        var message = "unknown option '\(name)' for \(verb.rawValue)" + hint(suggestion)
        let addOnly = ["every", "in", "at", "cron", "calendar", "timezone", "dst-gap", "dst-repeat", "overlap"]
        if suggestion == nil, verb == .exec, addOnly.contains(flagName(name)) {
            message += " (exec schedules with --start, --interval, --repeats and --async; or use 'timerctl add')"
        }
        return UsageError(message, verb: verb)
    }

    // MARK: Helpers

    /// A word that is a flag: starts with `-` and is not `-` alone.
    private static func isFlag(_ argument: String) -> Bool {
        argument.hasPrefix("-") && argument != "-"
    }

    /// `--name=value` → (`--name`, `value`); anything else → (argument, nil).
    private static func splitFlag(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    /// The flag's name without leading dashes, for suggestions.
    private static func flagName(_ argument: String) -> String {
        String(splitFlag(argument).0.drop(while: { $0 == "-" }))
    }

    /// The inline value, else the next argument (taken verbatim, even when it starts with `-`).
    private static func value(
        of synopsis: String, inline: String?, _ arguments: [String], _ index: inout Int, verb: CLIVerb?
    ) throws(UsageError) -> String {
        if let inline { return inline }
        guard index < arguments.count else {
            let name = synopsis.split(separator: " ").first.map(String.init) ?? synopsis
            throw UsageError("missing value for \(name) (\(synopsis))", verb: verb)
        }
        index += 1
        return arguments[index - 1]
    }

    private static func hint(_ suggestion: String?) -> String {
        suggestion.map { " (did you mean '\($0)'?)" } ?? ""
    }
}
