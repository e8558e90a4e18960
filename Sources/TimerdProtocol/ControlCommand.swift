import TimerdCore

/// A request decoded once into what it asks for: the one place each verb's words are checked.
///
/// `timerd` decodes every request line into a `ControlCommand` (``init(_:)``) and acts on the command;
/// `timerctl` builds one from its flags and sends its ``request``. So each verb's grammar (how many
/// names, `tag=` instead of names, RESUME's trailing `now` and `after=`, the `limit=` ranges) is
/// written here only, with the `ERR` codes and messages of `docs/protocol.md`.
///
/// What needs the daemon stays there: a job's options become a `JobSpec` (`ADD`, `EXEC`), `NEXT`'s a
/// `NextFireQuery`, a tag becomes the jobs that carry it, and who may do what is checked there.
///
/// Round trip: `ControlCommand(command.request) == command` for every command, except what the wire
/// cannot say: RESUME on schedule or `after=` of names whose last is `now` (a trailing `now` is the
/// mode). That is sent with another name last, so it comes back as the same jobs in another order; when
/// every name is `now`, as one `now` (resuming a job twice is resuming it once).
public enum ControlCommand: Sendable, Hashable {
    /// `PING`
    case ping
    /// `VERSION`
    case version
    /// `HELP`
    case help
    /// `ADD NAME key=value… [-- PROGRAM ARG…]`: the options as given (checked by `JobSpec`).
    case add(name: JobName, options: [Option], argv: [String]?)
    /// `EXEC key=value… [-- PROGRAM ARG…]`: the options as given (checked by `ExecRequest`).
    case exec(options: [Option], argv: [String]?)
    /// `CANCEL (NAME… | tag=T)`
    case cancel(Selection)
    /// `PAUSE (NAME… | tag=T)`
    case pause(Selection)
    /// `RESUME (NAME… | tag=T) [now | after=DUR]`
    case resume(Selection, ResumeWhen)
    /// `RUN NAME [env=NAME=VALUE…] [force=yes] [-- ARG…]`: a run by hand, with what it adds to the job, and
    /// whether it starts even where the job's `overlap` would refuse it.
    case run(JobName, RunParameters, force: Bool)
    /// `LIST [tag=T]`
    case list(tag: String?)
    /// `SHOW NAME`
    case show(JobName)
    /// `HISTORY NAME [limit=N]`: nil is the default, ``defaultHistoryLimit``.
    case history(JobName, limit: Int?)
    /// `WHY NAME [limit=N]`: nil is the default, ``defaultWhyLimit``.
    case why(JobName, limit: Int?)
    /// `RELOAD`
    case reload
    /// `MODE [NAME]`: show the mode, or switch to NAME.
    case mode(String?)
    /// `STATS`
    case stats
    /// `WATCH [NAME | tag=T]`
    case watch(WatchTarget)
    /// `CLUSTER`
    case cluster
    /// `NEXT key=value…`: the options as given (checked by `NextFireQuery`).
    case next(options: [Option])

    /// The jobs a CANCEL, PAUSE or RESUME acts on.
    public enum Selection: Sendable, Hashable {
        /// These jobs, by name (at least one).
        case names([JobName])
        /// Every job with this tag (a valid tag name); the reply lists the jobs acted on.
        case tag(String)
    }

    /// When a resumed job fires next.
    public enum ResumeWhen: Sendable, Hashable {
        /// On its schedule (no word).
        case onSchedule
        /// At once, then on its schedule (a trailing `now`).
        case now
        /// After this delay, the schedule continuing from that fire (`after=DUR`).
        case after(Duration)
    }

    /// What a WATCH follows.
    public enum WatchTarget: Sendable, Hashable {
        /// Every job, and the clock.
        case all
        /// One job.
        case job(JobName)
        /// The jobs with this tag.
        case tag(String)
    }

    /// One line per verb: its syntax, as `HELP` lists them (and `docs/protocol.md`).
    public static let usage: [(Verb, String)] = [
        (.ping, "PING"),
        (.version, "VERSION"),
        (.help, "HELP"),
        (.add, "ADD NAME (every=DUR [start=DUR] | in=DUR | at=TIME | cron=EXPR | calendar=SPEC | after=JOB) "
            + "(command=STRING | argv=WORDS | webhook=URL | -- PROGRAM ARG…) [key=value…]"),
        (.exec, "EXEC [start=DUR] [interval=DUR] [repeats=yes|no] [async=yes|no] "
            + "(command=STRING | argv=WORDS | webhook=URL | -- PROGRAM ARG…) [key=value…]"),
        (.cancel, "CANCEL (NAME… | tag=TAG)"),
        (.pause, "PAUSE (NAME… | tag=TAG)"),
        (.resume, "RESUME (NAME… | tag=TAG) [now | after=DUR]"),
        (.run, "RUN NAME [env=NAME=VALUE…] [force=yes] [-- ARG…]"),
        (.list, "LIST [tag=TAG]"),
        (.show, "SHOW NAME"),
        (.reload, "RELOAD"),
        (.mode, "MODE [NAME]"),
        (.stats, "STATS"),
        (.watch, "WATCH [NAME | tag=TAG]"),
        (.history, "HISTORY NAME [limit=N]"),
        (.why, "WHY NAME [limit=N]"),
        (.cluster, "CLUSTER"),
        (.next, "NEXT (cron=EXPR | calendar=SPEC | every=DUR) [count=N] [timezone=TZ] [from=TIME] [dst_gap=…] [dst_repeat=…]"),
    ]

    /// `HISTORY` without `limit=`: the last 20 runs.
    public static let defaultHistoryLimit = 20
    /// `WHY` without `limit=`: the last 10 due fires.
    public static let defaultWhyLimit = 10

    /// The wire verb.
    public var verb: Verb {
        switch self {
        case .ping: .ping
        case .version: .version
        case .help: .help
        case .add: .add
        case .exec: .exec
        case .cancel: .cancel
        case .pause: .pause
        case .resume: .resume
        case .run: .run
        case .list: .list
        case .show: .show
        case .history: .history
        case .why: .why
        case .reload: .reload
        case .mode: .mode
        case .stats: .stats
        case .watch: .watch
        case .cluster: .cluster
        case .next: .next
        }
    }

    // MARK: Decoding

    /// Decodes a parsed request line: checks the words the verb takes and their values.
    ///
    /// - Throws: `TimerdError` with code `.missingArgument` (a name is missing) or `.badArgument` (a word,
    ///   option or program the verb does not take; an invalid job name, tag, `limit=` or `after=`).
    public init(_ request: Request) throws(TimerdError) {
        switch request.verb {
        case .ping: self = try Self.bare(request, .ping)
        case .version: self = try Self.bare(request, .version)
        case .help: self = try Self.bare(request, .help)
        case .reload: self = try Self.bare(request, .reload)
        case .stats: self = try Self.bare(request, .stats)
        case .cluster: self = try Self.bare(request, .cluster)
        case .add:
            let names = try Self.names(request, 1...1, options: true, argv: true)
            self = .add(name: names[0], options: request.options, argv: request.argv)
        case .exec:
            try Self.names(request, 0...0, options: true, argv: true)
            self = .exec(options: request.options, argv: request.argv)
        case .cancel:
            self = .cancel(try Self.selection(request))
        case .pause:
            self = .pause(try Self.selection(request))
        case .resume:
            // `RESUME a now`: a trailing `now` is the mode when a name (or a tag) precedes it.
            var names = request
            let now = names.positionals.count >= (request.values("tag").isEmpty ? 2 : 1) && names.positionals.last == "now"
            if now { names.positionals.removeLast() }
            self = try Self(resuming: names, now: now)
        case .run:
            let name = try Self.names(request, 1...1, options: true, argv: true)[0]
            var parameters = RunParameters(arguments: request.argv ?? [])
            try RunParameters.check(arguments: parameters.arguments)
            var force = false
            for option in request.options {
                switch option.key {
                case "env": parameters.env.append(try RunParameters.environmentPair(option.value))
                case "force": force = try ExecRequest.parseBool(option.value, key: "force")
                default:
                    throw TimerdError(.badArgument, "RUN takes env=NAME=VALUE and force=yes|no, got \(option.key)=", key: option.key)
                }
            }
            self = .run(name, parameters, force: force)
        case .show:
            self = .show(try Self.names(request, 1...1)[0])
        case .list:
            if let tag = try Self.tag(request) {
                self = .list(tag: tag)
            } else {
                try Self.names(request, 0...0)
                self = .list(tag: nil)
            }
        case .history:
            let names = try Self.names(request, 1...1, options: true)
            self = .history(names[0], limit: try Self.limit(request, maximum: Limits.maximumHistoryLimit))
        case .why:
            let names = try Self.names(request, 1...1, options: true)
            self = .why(names[0], limit: try Self.limit(request, maximum: Limits.fireRecordsKept))
        case .mode:
            // A mode name is checked as a job name is (same characters), and named as what it is.
            self = .mode(try Self.names(request, 0...1, naming: "mode name").first?.rawValue)
        case .watch:
            if let tag = try Self.tag(request) {
                self = .watch(.tag(tag))
            } else {
                self = .watch(try Self.names(request, 0...1).first.map(WatchTarget.job) ?? .all)
            }
        case .next:
            try Self.names(request, 0...0, options: true)
            self = .next(options: request.options)
        }
    }

    /// Decodes a RESUME whose positionals are all job names, `now` being given apart (as timerctl's
    /// `--now` gives it): `RESUME a now` read this way resumes the jobs `a` and `now` on schedule.
    /// ``init(_:)`` takes a trailing `now` off the line and comes here. Same errors as ``init(_:)``.
    public init(resuming request: Request, now: Bool) throws(TimerdError) {
        let tag = try Self.tag(request, allowing: ["after"], positionals: ["now"])
        var when = now ? ResumeWhen.now : .onSchedule
        for option in request.options where option.key != "tag" {
            guard option.key == "after" else {
                throw TimerdError(.badArgument, "RESUME takes only tag=TAG and after=DUR, not \(option.key)=", key: option.key)
            }
            guard case .onSchedule = when else {
                throw TimerdError(.badArgument, "give either now or after=DUR, not both", key: "after")
            }
            do {
                when = .after(try DurationText.parse(option.value))
            } catch {
                throw TimerdError(.badArgument, "after: \(error.message)", key: "after")
            }
        }
        if let tag {
            self = .resume(.tag(tag), when)
        } else {
            let names = try Self.names(Request(verb: .resume, positionals: request.positionals, argv: request.argv), 1...Int.max)
            self = .resume(.names(names), when)
        }
    }

    /// A verb that takes no words.
    private static func bare(_ request: Request, _ command: ControlCommand) throws(TimerdError) -> ControlCommand {
        try names(request, 0...0)
        return command
    }

    /// CANCEL's and PAUSE's jobs: `tag=T`, or one or more names.
    private static func selection(_ request: Request) throws(TimerdError) -> Selection {
        if let tag = try tag(request) { return .tag(tag) }
        return .names(try names(request, 1...Int.max))
    }

    /// The `tag=T` of a request that acts on a tag instead of names (nil when it names jobs). With a tag,
    /// no names may be given; other options must be in `allowing`, other words in `positionals`.
    private static func tag(
        _ request: Request, allowing: Set<String> = [], positionals: Set<String> = []
    ) throws(TimerdError) -> String? {
        let tags = request.values("tag")
        guard !tags.isEmpty else { return nil }
        let verb = request.verb.rawValue
        guard tags.count == 1 else { throw TimerdError(.badArgument, "\(verb) takes one tag=", key: "tag") }
        if let word = request.positionals.first(where: { !positionals.contains($0) }) {
            throw TimerdError(.badArgument, "\(verb) takes job names or tag=, not both (got \"\(word)\")", key: "tag")
        }
        if let option = request.options.first(where: { $0.key != "tag" && !allowing.contains($0.key) }) {
            throw TimerdError(.badArgument, "\(verb) does not take \(option.key)=", key: option.key)
        }
        if request.argv != nil { throw TimerdError(.badArgument, "\(verb) takes no program after --") }
        return try Mode.validName(tags[0], key: "tag", what: "tag")
    }

    /// Checks the shape of a request and returns its positionals as job names.
    @discardableResult
    private static func names(
        _ request: Request, _ count: ClosedRange<Int>, options: Bool = false, argv: Bool = false, naming what: String = "job name"
    ) throws(TimerdError) -> [JobName] {
        let verb = request.verb.rawValue
        if !options, let option = request.options.first {
            throw TimerdError(.badArgument, "\(verb) takes no options, got \(option.key)=", key: option.key)
        }
        if !argv, request.argv != nil {
            throw TimerdError(.badArgument, "\(verb) takes no program after --")
        }
        let given = request.positionals.count
        if given < count.lowerBound {
            throw TimerdError(.missingArgument, count.lowerBound == 1 && count.upperBound == 1
                ? "\(verb) needs a \(what)" : "\(verb) needs at least one \(what)")
        }
        if given > count.upperBound {
            let extra = request.positionals[count.upperBound]
            throw TimerdError(.badArgument, count.upperBound == 0
                ? "\(verb) takes no arguments, got \"\(extra)\"" : "\(verb) takes one \(what); unexpected \"\(extra)\"")
        }
        var result: [JobName] = []
        for word in request.positionals { result.append(try JobName(word, naming: what)) }
        return result
    }

    /// HISTORY's and WHY's `limit=N` (their only option), 1 to `maximum`; nil when not given.
    private static func limit(_ request: Request, maximum: Int) throws(TimerdError) -> Int? {
        var limit: Int?
        for option in request.options {
            guard option.key == "limit" else {
                throw TimerdError(.badArgument, "\(request.verb.rawValue) takes only limit=N, not \(option.key)=", key: option.key)
            }
            guard option.value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(option.value),
                  (1...maximum).contains(number) else {
                throw TimerdError(.badArgument, "limit: expected a whole number from 1 to \(maximum), got \"\(option.value)\"", key: "limit")
            }
            limit = number
        }
        return limit
    }

    // MARK: Encoding

    /// The request that decodes back to this command (see the type's note on RESUME).
    public var request: Request {
        switch self {
        case .ping, .version, .help, .reload, .stats, .cluster:
            return Request(verb: verb)
        case .add(let name, let options, let argv):
            return Request(verb: .add, positionals: [name.rawValue], options: options, argv: argv)
        case .exec(let options, let argv):
            return Request(verb: .exec, options: options, argv: argv)
        case .cancel(let selection), .pause(let selection):
            return Self.request(verb, selection)
        case .resume(let selection, let when):
            var request = Self.request(.resume, selection)
            if when != .now, request.positionals.count >= 2, request.positionals.last == "now" {
                // A trailing `now` would be read as the mode: end with another name, if there is one.
                if let other = request.positionals.lastIndex(where: { $0 != "now" }) {
                    request.positionals.append(request.positionals.remove(at: other))
                } else {
                    request.positionals = ["now"]
                }
            }
            switch when {
            case .onSchedule: break
            case .now: request.positionals.append("now")
            case .after(let delay): request.options.append(Option(key: "after", value: DurationText.format(delay)))
            }
            return request
        case .run(let name, let parameters, let force):
            let options = parameters.env.map { Option(key: "env", value: "\($0.key)=\($0.value)") }
                + (force ? [Option(key: "force", value: "yes")] : [])
            return Request(verb: .run, positionals: [name.rawValue], options: options,
                           argv: parameters.arguments.isEmpty ? nil : parameters.arguments)
        case .show(let name):
            return Request(verb: verb, positionals: [name.rawValue])
        case .list(let tag):
            return Request(verb: .list, options: tag.map { [Option(key: "tag", value: $0)] } ?? [])
        case .history(let name, let limit), .why(let name, let limit):
            return Request(verb: verb, positionals: [name.rawValue], options: limit.map { [Option(key: "limit", value: String($0))] } ?? [])
        case .mode(let name):
            return Request(verb: .mode, positionals: name.map { [$0] } ?? [])
        case .watch(let target):
            switch target {
            case .all: return Request(verb: .watch)
            case .job(let name): return Request(verb: .watch, positionals: [name.rawValue])
            case .tag(let tag): return Request(verb: .watch, options: [Option(key: "tag", value: tag)])
            }
        case .next(let options):
            return Request(verb: .next, options: options)
        }
    }

    private static func request(_ verb: Verb, _ selection: Selection) -> Request {
        switch selection {
        case .names(let names): Request(verb: verb, positionals: names.map(\.rawValue))
        case .tag(let tag): Request(verb: verb, options: [Option(key: "tag", value: tag)])
        }
    }
}
