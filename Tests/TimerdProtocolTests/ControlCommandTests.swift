import Testing
import TimerdCore
import TimerdProtocol

private func name(_ text: String) -> JobName { try! JobName(text) }

@Suite("Typed commands: decoding and encoding")
struct ControlCommandTests {
    /// At least one command of every verb, with each shape its arguments take. (RESUME on schedule or
    /// after= of names ending in `now` comes back in another order: see `encodes`.)
    static let commands: [ControlCommand] = [
        .ping, .version, .help, .reload, .stats, .cluster,
        .add(name: name("backup"), options: [Option(key: "every", value: "1h"), Option(key: "command", value: "tar czf /b.tgz /etc")], argv: nil),
        .add(name: name("-odd"), options: [Option(key: "in", value: "5s"), Option(key: "env", value: "A=1")], argv: ["/bin/echo", "--", "a=b", ""]),
        .add(name: name("now"), options: [], argv: []),
        .exec(options: [Option(key: "start", value: "1s")], argv: nil),
        .exec(options: [], argv: ["sleep", "1"]),
        .cancel(.names([name("a"), name("b")])), .cancel(.tag("web")),
        .pause(.names([name("now")])), .pause(.tag("web")),
        .resume(.names([name("a")]), .onSchedule), .resume(.names([name("a"), name("b")]), .now),
        .resume(.names([name("a")]), .after(.seconds(90))), .resume(.tag("web"), .onSchedule), .resume(.tag("web"), .now),
        .resume(.tag("web"), .after(.milliseconds(250))),
        .resume(.names([name("now")]), .onSchedule), .resume(.names([name("now")]), .now),
        .resume(.names([name("now"), name("a")]), .onSchedule), .resume(.names([name("now"), name("now")]), .now),
        .resume(.names([name("now"), name("a")]), .after(.seconds(1))),
        .run(name("a"), RunParameters(), force: false), .show(name("a")),
        .run(name("a"), RunParameters(env: [KeyValue("A", "1 2"), KeyValue("B", "")], arguments: ["x", "--", ""]), force: true),
        .run(name("now"), RunParameters(arguments: ["y"]), force: false),
        .list(tag: nil), .list(tag: "web"),
        .history(name("a"), limit: nil), .history(name("a"), limit: 10_000), .why(name("a"), limit: nil), .why(name("a"), limit: 1),
        .mode(nil), .mode("maintenance"),
        .watch(.all), .watch(.job(name("a"))), .watch(.tag("web")),
        .next(options: [Option(key: "cron", value: "0 9 * * 1-5"), Option(key: "count", value: "3")]),
    ]

    @Test func everyVerbIsCovered() {
        #expect(Set(Self.commands.map(\.verb)) == Set(Verb.allCases))
    }

    @Test func everyVerbHasOneUsageLineStartingWithIt() {
        #expect(ControlCommand.usage.map(\.0).sorted { $0.rawValue < $1.rawValue } == Verb.allCases.sorted { $0.rawValue < $1.rawValue })
        for (verb, line) in ControlCommand.usage { #expect(line.hasPrefix(verb.rawValue), "\(line)") }
    }

    /// HELP's lines say what the parsers take: every schedule and action of ADD's and EXEC's lines makes
    /// a job, and they, and NEXT's, name every key of their own.
    @Test func helpLinesNameWhatTheParsersTake() throws {
        let lines = Dictionary(uniqueKeysWithValues: ControlCommand.usage)
        let schedules = [["every=1s", "start=1s"], ["in=1s"], ["at=2030-01-01T00:00:00Z"], ["cron=0 * * * *"], ["calendar=daily"], ["after=up"]]
        let actions: [(options: [String], argv: [String]?)] = [
            (["command=true"], nil), (["argv=/bin/true"], nil), (["webhook=https://example.net/hook"], nil), ([], ["/bin/true"]),
        ]
        func options(_ words: [String]) -> [KeyValue] {
            words.map { word in KeyValue(String(word.prefix { $0 != "=" }), String(word.drop { $0 != "=" }.dropFirst())) }
        }
        for schedule in schedules {
            for word in schedule { #expect(lines[.add]!.contains(word.prefix { $0 != "=" } + "="), "ADD's line names \(word)") }
            for action in actions {
                _ = try JobSpec(name: name("a"), options: options(schedule + action.options), argv: action.argv)
            }
        }
        for action in actions {
            let word = action.argv == nil ? String(action.options[0].prefix { $0 != "=" }) + "=" : "-- PROGRAM"
            #expect(lines[.add]!.contains(word) && lines[.exec]!.contains(word), "ADD's and EXEC's lines name \(word)")
            _ = try ExecRequest.spec(name: name("e"), options: options(["start=1s", "interval=1s", "repeats=yes"] + action.options), argv: action.argv)
        }
        for key in ExecRequest.keys { #expect(lines[.exec]!.contains("[\(key)="), "EXEC's line names \(key)") }
        for key in NextFireQuery.keys { #expect(lines[.next]!.contains("\(key)="), "NEXT's line names \(key)") }
        // With no action, a request is told every way to give one (a config file is told its own, TimerdConfigTests).
        #expect(throws: TimerdError(.missingArgument, "")) { try JobSpec(name: name("a"), options: options(["every=1s"])) }
        do {
            _ = try JobSpec(name: name("a"), options: options(["every=1s"]))
        } catch {
            #expect(error.message == "an action is required: command=STRING, argv=WORDS, webhook=URL or a program after --")
        }
    }

    @Test("round trip: the command's request decodes to the command, also through its line", arguments: commands)
    func roundTrip(command: ControlCommand) throws {
        #expect(try ControlCommand(command.request) == command)
        #expect(try ControlCommand(Request.parse(command.request.encode())) == command, "\(command.request)")
        #expect(command.request.verb == command.verb)
    }

    @Test("wire lines decode", arguments: [
        ("PING", ControlCommand.ping),
        ("RESUME a now", .resume(.names([name("a")]), .now)),
        ("RESUME now", .resume(.names([name("now")]), .onSchedule)),
        ("RESUME now now", .resume(.names([name("now")]), .now)),
        ("RESUME now a", .resume(.names([name("now"), name("a")]), .onSchedule)),
        ("RESUME tag=web now", .resume(.tag("web"), .now)),
        ("RESUME now tag=web", .resume(.tag("web"), .now)),
        ("RESUME tag=web now now", .resume(.tag("web"), .now)),
        ("RESUME a after=1m30s", .resume(.names([name("a")]), .after(.seconds(90)))),
        ("HISTORY a", .history(name("a"), limit: nil)),
        ("HISTORY a limit=005 limit=7", .history(name("a"), limit: 7)),
        ("WHY a limit=50", .why(name("a"), limit: 50)),
        ("WATCH", .watch(.all)),
        ("watch tag=web", .watch(.tag("web"))),
        ("MODE", .mode(nil)),
        ("LIST tag=web", .list(tag: "web")),
        ("CANCEL a a", .cancel(.names([name("a"), name("a")]))),
        ("ADD x every=1s -- prog --help", .add(name: name("x"), options: [Option(key: "every", value: "1s")], argv: ["prog", "--help"])),
        ("NEXT", .next(options: [])),
    ])
    func decodes(line: String, command: ControlCommand) throws {
        #expect(try ControlCommand(Request.parse(line)) == command)
    }

    /// On schedule or with after=, a last name `now` would be read as the mode: another name goes last
    /// (the same jobs, in another order), and when every name is `now`, one is sent.
    @Test("encoding keeps a job named now off the end and writes durations exactly", arguments: [
        (ControlCommand.resume(.names([name("a"), name("now")]), .onSchedule), "RESUME now a"),
        (.resume(.names([name("a"), name("b"), name("now")]), .onSchedule), "RESUME a now b"),
        (.resume(.names([name("a"), name("now")]), .now), "RESUME a now now"),
        (.resume(.names([name("now"), name("now")]), .onSchedule), "RESUME now"),
        (.resume(.names([name("a"), name("now")]), .after(.seconds(1))), "RESUME now a after=1s"),
        (.resume(.tag("web"), .now), "RESUME now tag=web"),
        (.resume(.names([name("a")]), .after(.seconds(90))), "RESUME a after=1m30s"),
        (.history(name("a"), limit: 5), "HISTORY a limit=5"),
        (.watch(.tag("web")), "WATCH tag=web"),
    ])
    func encodes(command: ControlCommand, line: String) {
        #expect(command.request.encode() == line)
    }

    /// timerctl gives `--now` apart from the names, so a job named `now` stays a name.
    @Test func resumingWithNowGivenApart() throws {
        let names = Request(verb: .resume, positionals: ["a", "now"])
        #expect(try ControlCommand(resuming: names, now: false) == .resume(.names([name("a"), name("now")]), .onSchedule))
        #expect(try ControlCommand(resuming: names, now: true) == .resume(.names([name("a"), name("now")]), .now))
        let after = Request(verb: .resume, positionals: ["a"], options: [Option(key: "after", value: "5s")])
        #expect(caught { try ControlCommand(resuming: after, now: true) }?.message == "give either now or after=DUR, not both")
        #expect(try ControlCommand(resuming: Request(verb: .resume, options: [Option(key: "tag", value: "t")]), now: true)
            == .resume(.tag("t"), .now))
    }

    @Test("grammar errors: code and message", arguments: [
        ("PING x", TimerdError.Code.badArgument, #"PING takes no arguments, got "x""#),
        ("SHOW", .missingArgument, "SHOW needs a job name"),
        ("CANCEL", .missingArgument, "CANCEL needs at least one job name"),
        ("PAUSE a tag=t", .badArgument, #"PAUSE takes job names or tag=, not both (got "a")"#),
        ("RESUME a now after=1s", .badArgument, "give either now or after=DUR, not both"),
        ("HISTORY a limit=0", .badArgument, #"limit: expected a whole number from 1 to 10000, got "0""#),
        ("WHY a limit=51", .badArgument, #"limit: expected a whole number from 1 to 50, got "51""#),
        ("WATCH tag=a tag=b", .badArgument, "WATCH takes one tag="),
        ("RUN 'a b'", .badArgument, #"invalid job name "a b": only letters, digits, '_', '.' and '-' are allowed"#),
    ])
    func errors(line: String, code: TimerdError.Code, message: String) throws {
        let error = caught { try ControlCommand(Request.parse(line)) }
        #expect(error?.code == code)
        #expect(error?.message == message)
    }
}
