import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol

@Suite("argv → request")
struct CommandParserTests {
    // MARK: Every verb

    @Test("each verb maps to its wire line", arguments: [
        (["add", "backup", "--every", "5m", "--command", "tar czf /b.tgz /home"],
         "ADD backup every=5m command='tar czf /b.tgz /home'"),
        (["exec", "--start", "1s", "--interval", "10s", "--repeats", "--async", "--command", "true"],
         "EXEC start=1s interval=10s repeats=yes async=yes command=true"),
        (["cancel", "a", "b"], "CANCEL a b"),
        (["pause", "a"], "PAUSE a"),
        (["resume", "a", "b"], "RESUME a b"),
        (["resume", "a", "b", "--now"], "RESUME a b now"),
        (["resume", "a", "--after", "30s"], "RESUME a after=30s"),
        (["resume", "--after=30s", "a", "b"], "RESUME a b after=30s"),
        (["run", "a"], "RUN a"),
        (["list"], "LIST"),
        (["show", "a"], "SHOW a"),
        (["history", "a"], "HISTORY a"),
        (["history", "a", "--limit", "5"], "HISTORY a limit=5"),
        (["history", "--limit=100", "a", "--json"], "HISTORY a limit=100"),
        (["reload"], "RELOAD"),
        (["ping"], "PING"),
        (["version"], "VERSION"),
        (["mode"], "MODE"),
        (["mode", "maintenance"], "MODE maintenance"),
        (["stats"], "STATS"),
    ])
    func verbs(arguments: [String], line: String) throws {
        #expect(try request(arguments).encode() == line)
    }

    @Test func commandCarriesVerbOutputAndSocket() throws {
        let command = try CommandParser.parse(["--socket", "/tmp/s", "list", "--json"])
        #expect(command == Command(verb: .list, action: .send(.list(tag: nil)), output: .json, socket: "/tmp/s"))
    }

    // MARK: Flag forms

    @Test func flagValueSeparateOrAfterEquals() throws {
        let separate = try request(["add", "x", "--every", "5s", "--command", "true"])
        let joined = try request(["add", "x", "--every=5s", "--command=true"])
        #expect(separate == joined)
        #expect(joined.options == [Option(key: "every", value: "5s"), Option(key: "command", value: "true")])
    }

    @Test func valueAfterEqualsKeepsFurtherEqualsAndMayBeEmpty() throws {
        let parsed = try request(["add", "x", "--env=A=b=c", "--cwd=", "--every", "1s", "--command", "true"])
        #expect(parsed.values("env") == ["A=b=c"])
        #expect(parsed.value("cwd") == "")
    }

    @Test func valueIsTakenVerbatimEvenWhenItLooksLikeAFlag() throws {
        let parsed = try request(["add", "x", "--every", "1s", "--command", "--json"])
        #expect(parsed.value("command") == "--json")
        #expect(try CommandParser.parse(["add", "x", "--every", "1s", "--command", "--json"]).output == .text)
    }

    @Test func everyJobKeyIsAKebabCaseFlag() throws {
        for key in JobSpec.keys {
            let flag = "--" + String(key.map { $0 == "_" ? "-" : $0 })
            // A switch (--fixed-jitter, --fail-on-stderr) takes its value only after "=".
            let parsed = try request(Flag.switchKeys.contains(key) ? ["add", "x", flag + "=v"] : ["add", "x", flag, "v"])
            #expect(parsed.options == [Option(key: key, value: "v")], "\(flag)")
        }
        #expect(try request(["add", "x", "--kill-grace", "10s"]).encode() == "ADD x kill_grace=10s")
    }

    @Test func runTakesEnvForceAndArguments() throws {
        #expect(try request(["run", "a", "--env", "A=1 2", "--force", "--", "x", "--y"]).encode() == "RUN a env='A=1 2' force=yes -- x --y")
        #expect(try request(["run", "a"]).encode() == "RUN a")
    }

    @Test func everyJobKeyHasItsOwnHelpLine() {
        let flags = CLIVerb.add.flags.filter { $0.name != "owner-pid" }  // a shorthand for --owner
        #expect(flags.map(\.key) == JobSpec.keys)
        for flag in flags { #expect(!flag.help.hasPrefix("Sets the job key"), "\(flag.name) has no help line") }
    }

    @Test func flagNameConversion() {
        #expect(Flag.flagName(forKey: "kill_grace") == "kill-grace")
        #expect(Flag.key(forFlagName: "kill-grace") == "kill_grace")
        #expect(Flag.flagName(forKey: "every") == "every")
    }

    @Test func repeatedEnvAndMetaKeepTheirOrder() throws {
        let parsed = try request([
            "add", "x", "--env", "A=1", "--meta", "owner=me", "--env=B=2", "--every", "1s", "--command", "true",
        ])
        #expect(parsed.values("env") == ["A=1", "B=2"])
        #expect(parsed.values("meta") == ["owner=me"])
        #expect(parsed.encode() == "ADD x env=A=1 meta=owner=me env=B=2 every=1s command=true")
    }

    @Test func wallClockScheduleFlags() throws {
        let parsed = try request([
            "add", "standup", "--cron", "0 9 * * 1-5", "--timezone", "Europe/Berlin", "--dst-gap", "skip",
            "--dst-repeat=both", "--jitter", "5m", "--fixed-jitter", "--command", "true",
        ])
        #expect(parsed.encode()
            == "ADD standup cron='0 9 * * 1-5' timezone=Europe/Berlin dst_gap=skip dst_repeat=both jitter=5m fixed_jitter=yes command=true")
        #expect(try request(["add", "w", "--calendar=Sat,Sun 10:00", "--command", "true"]).encode()
            == "ADD w calendar='Sat,Sun 10:00' command=true")
        #expect(try request(["add", "w", "--every", "1h", "--jitter", "1m", "--fixed-jitter=no", "--command", "true"]).value("fixed_jitter")
            == "no")
        #expect(usageError(["add", "w", "--fixed-jitter=yes", "--fixed-jitter", "yes"])?.message
            == "unexpected argument 'yes' (add takes one job name)")
    }

    @Test func execKeepsJitterButHasNoWallClockSchedule() throws {
        #expect(try request(["exec", "--interval", "1h", "--repeats", "--jitter", "5m", "--fixed-jitter", "--command", "true"]).encode()
            == "EXEC interval=1h repeats=yes jitter=5m fixed_jitter=yes command=true")
        for flag in ["--cron", "--calendar", "--timezone", "--dst-gap", "--dst-repeat"] {
            #expect(usageError(["exec", flag, "x", "--command", "true"])?.message
                == "unknown option '\(flag)' for exec (exec schedules with --start, --interval, --repeats and --async; or use 'timerctl add')")
        }
    }

    @Test func misfireAndHistoryFlags() throws {
        #expect(try request([
            "add", "nightly", "--calendar", "*-*-* 02:00", "--misfire", "once", "--misfire-grace", "10m",
            "--history-limit=500", "--command", "true",
        ]).encode() == "ADD nightly calendar='*-*-* 02:00' misfire=once misfire_grace=10m history_limit=500 command=true")
        // exec keeps them: they are not schedule keys.
        #expect(try request(["exec", "--interval", "1h", "--repeats", "--misfire=all", "--history-limit", "0", "--command", "true"]).encode()
            == "EXEC interval=1h repeats=yes misfire=all history_limit=0 command=true")
        #expect(CLIVerb.add.flags.first { $0.name == "misfire" }?.synopsis == "--misfire skip|once|all")
        #expect(usageError(["add", "x", "--misfre", "all"])?.message == "unknown option '--misfre' for add (did you mean '--misfire'?)")
    }

    @Test func runOnFlag() throws {
        #expect(try request(["add", "report", "--every", "1h", "--run-on", "ssd,eu-west", "--command", "true"]).encode()
            == "ADD report every=1h run_on=ssd,eu-west command=true")
        #expect(try request(["exec", "--run-on=gpu", "--command", "true"]).encode() == "EXEC run_on=gpu command=true")
        #expect(CLIVerb.add.flags.first { $0.name == "run-on" }?.synopsis == "--run-on TAG[,TAG]")
    }

    @Test func historySendsOneNameAndTheLimit() throws {
        let command = try CommandParser.parse(["history", "backup", "--limit", "3", "--json", "--socket", "/s"])
        #expect(command == Command(verb: .history, action: .send(.history(try JobName("backup"), limit: 3)), output: .json, socket: "/s"))
        #expect(command.request == Request(verb: .history, positionals: ["backup"], options: [Option(key: "limit", value: "3")]))
        #expect(CLIVerb.history.wireVerb == .history)
        #expect(CLIVerb.history.names == .one)
        #expect(!CLIVerb.history.selectsByTag)
        // The value (1…10000) is checked by timerd's decoder, here too: timerd's error, nothing sent.
        #expect(try CommandParser.parse(["history", "a", "--limit", "0"]).action
            == .refuse(TimerdError(.badArgument, #"limit: expected a whole number from 1 to 10000, got "0""#)))
        #expect(try request(["history", "--", "-odd"]).encode() == "HISTORY -odd")
    }

    @Test func nextIsAnsweredLocally() throws {
        let command = try CommandParser.parse(["next", "--cron", "0 9 * * 1-5", "--count=3", "--timezone", "Europe/Berlin", "--json"])
        #expect(command.verb == .next)
        #expect(command.request == nil)
        #expect(command.output == .json)
        #expect(command.action == .next([
            Option(key: "cron", value: "0 9 * * 1-5"), Option(key: "count", value: "3"), Option(key: "timezone", value: "Europe/Berlin"),
        ]))
        #expect(CLIVerb.next.wireVerb == nil)
        #expect(try CommandParser.parse(["next", "--every", "90m", "--from", "2026-03-27T00:00:00Z", "--socket", "/s"]).action
            == .next([Option(key: "every", value: "90m"), Option(key: "from", value: "2026-03-27T00:00:00Z")]))
        #expect(try CommandParser.parse(["next", "--calendar", "daily", "--dst-repeat", "last", "--dst-gap=shift"]).action
            == .next([Option(key: "calendar", value: "daily"), Option(key: "dst_repeat", value: "last"), Option(key: "dst_gap", value: "shift")]))
    }

    @Test func booleanFlagsMayTakeAnExplicitValue() throws {
        #expect(try request(["exec", "--repeats=no", "--async", "--command", "true"]).encode()
            == "EXEC repeats=no async=yes command=true")
    }

    @Test func execAcceptsTheGeneralJobFlags() throws {
        let parsed = try request([
            "exec", "--start", "0s", "--timeout", "5s", "--env", "A=1", "--meta", "k=v", "--cwd", "/tmp",
            "--kill-grace", "1s", "--leeway", "10ms", "--command", "true",
        ])
        #expect(parsed.encode() == "EXEC start=0s timeout=5s env=A=1 meta=k=v cwd=/tmp kill_grace=1s leeway=10ms command=true")
    }

    // MARK: --json, --socket, --

    @Test("--json before or after the verb", arguments: [["--json", "list"], ["list", "--json"]])
    func jsonInBothPositions(arguments: [String]) throws {
        let command = try CommandParser.parse(arguments)
        #expect(command.output == .json)
        #expect(command.request == Request(verb: .list))
    }

    @Test("--socket forms", arguments: [
        ["--socket", "/s", "ping"], ["--socket=/s", "ping"], ["ping", "--socket", "/s"], ["ping", "--socket=/s"],
    ])
    func socketForms(arguments: [String]) throws {
        #expect(try CommandParser.parse(arguments).socket == "/s")
    }

    @Test func doubleDashGivesTheProgramVerbatim() throws {
        let parsed = try request(["add", "x", "--every", "1s", "--", "/bin/echo", "--json", "--every", "a b", "--", "k=v", ""])
        #expect(parsed.argv == ["/bin/echo", "--json", "--every", "a b", "--", "k=v", ""])
        #expect(parsed.options == [Option(key: "every", value: "1s")])
        #expect(parsed.encode() == "ADD x every=1s -- /bin/echo --json --every 'a b' '--' 'k=v' ''")
        #expect(try CommandParser.parse(["add", "x", "--", "prog", "--json"]).output == .text)
    }

    @Test func execTakesAProgramAfterDoubleDash() throws {
        #expect(try request(["exec", "--start", "1s", "--", "sleep", "1"]).encode() == "EXEC start=1s -- sleep 1")
    }

    @Test func doubleDashEndsFlagsForNameVerbs() throws {
        #expect(try request(["cancel", "--", "-x", "--y"]).positionals == ["-x", "--y"])
        #expect(try request(["show", "--", "-x"]).encode() == "SHOW -x")
    }

    @Test func resumeKeepsAJobNamedNowOffTheEnd() throws {
        #expect(try request(["resume", "a", "now"]).encode() == "RESUME now a")
        #expect(try request(["resume", "now"]).encode() == "RESUME now")
        #expect(try request(["resume", "a", "now", "--now"]).encode() == "RESUME a now now")
    }

    @Test func resumeGivesNowApartFromTheNames() throws {
        let a = try JobName("a"), now = try JobName("now")
        #expect(try CommandParser.parse(["resume", "a", "now"]).action == .send(.resume(.names([a, now]), .onSchedule)))
        #expect(try CommandParser.parse(["resume", "a", "now", "--now"]).action == .send(.resume(.names([a, now]), .now)))
        #expect(try CommandParser.parse(["resume", "--tag", "web", "--after", "90s"]).action == .send(.resume(.tag("web"), .after(.seconds(90)))))
    }

    @Test("what timerctl sends is a command timerd decodes back to itself", arguments: [
        ["add", "x", "--every", "1s", "--", "prog", "a=b"], ["exec", "--start", "1s", "--command", "true"], ["cancel", "a", "b"],
        ["pause", "--tag", "web"], ["resume", "now", "a"], ["resume", "a", "now", "--now"], ["resume", "now", "a", "--after", "1m"], ["run", "a"], ["list", "--tag", "t"],
        ["show", "a"], ["history", "a", "--limit", "7"], ["why", "a", "--last", "3"], ["reload"], ["mode", "m"], ["stats"],
        ["watch", "a"], ["watch", "--tag", "t"], ["watch"], ["cluster"], ["ping"], ["version"],
    ])
    func sentCommandsRoundTrip(arguments: [String]) throws {
        guard case .send(let command) = try CommandParser.parse(arguments).action else {
            Issue.record("\(arguments) sends nothing")
            return
        }
        #expect(try ControlCommand(Request.parse(command.request.encode())) == command)
    }

    /// Values timerd's decoder refuses: timerctl refuses them with timerd's own error (the one timerd
    /// gives for the same request line), exit status 1, and sends nothing.
    @Test("timerd's grammar errors, found before sending", arguments: [
        (["history", "a", "--limit", "0"], "HISTORY a limit=0"),
        (["history", "a", "--limit=+5"], "HISTORY a limit=+5"),
        (["why", "a", "--last", "51"], "WHY a limit=51"),
        (["resume", "a", "--after", "soon"], "RESUME a after=soon"),
        (["resume", "--tag", "web", "--after="], "RESUME tag=web after="),
        (["show", "a b"], "SHOW 'a b'"),
        (["cancel", "a", "b/c"], "CANCEL a b/c"),
        (["mode", "a b"], "MODE 'a b'"),
        (["watch", "--tag", "a b"], "WATCH tag='a b'"),
        (["list", "--tag", ""], "LIST tag="),
        (["add", "", "--every", "1s", "--command", "true"], "ADD '' every=1s command=true"),
    ])
    func refusedLikeTimerd(arguments: [String], line: String) throws {
        let error = try #require(caughtTimerdError { () throws(TimerdError) in _ = try ControlCommand(Request.parse(line)) })
        #expect(try CommandParser.parse(arguments).action == .refuse(error))
        let result = runCLI(arguments)
        #expect(result.status == ExitStatus.daemonError)
        #expect(result.sent.isEmpty)
        #expect(result.stderr == "timerctl: \(error.message) (\(error.code.rawValue))\n")
    }

    // MARK: Help

    @Test("help requests", arguments: [
        (["--help"], nil), (["-h"], nil), (["help"], nil), (["help", "help"], nil),
        (["add", "--help"], CLIVerb.add), (["add", "-h"], .add), (["help", "add"], .add),
        (["--help", "show"], .show), (["resume", "x", "--bogus", "--help"], .resume),
    ] as [([String], CLIVerb?)])
    func help(arguments: [String], topic: CLIVerb?) throws {
        #expect(try CommandParser.parse(arguments).action == .help(topic))
    }

    @Test func helpAfterDoubleDashIsPartOfTheProgram() throws {
        #expect(try request(["add", "x", "--every", "1s", "--", "prog", "--help"]).argv == ["prog", "--help"])
    }

    // MARK: Usage errors

    @Test("usage errors", arguments: [
        ([], "missing verb"),
        (["--json"], "missing verb"),
        (["lst"], "unknown verb 'lst' (did you mean 'list'?)"),
        (["LIST"], "unknown verb 'LIST' (did you mean 'list'?)"),
        (["frobnicate"], "unknown verb 'frobnicate'"),
        (["--jsn", "list"], "unknown option '--jsn' (did you mean '--json'?)"),
        (["--", "list"], "expected a verb before '--'"),
        (["add", "x", "--evry", "5s"], "unknown option '--evry' for add (did you mean '--every'?)"),
        (["add", "x", "--kill_grace", "5s"], "unknown option '--kill_grace' for add (did you mean '--kill-grace'?)"),
        (["add", "x", "--comand=true"], "unknown option '--comand' for add (did you mean '--command'?)"),
        (["add", "x", "--frobnicate"], "unknown option '--frobnicate' for add"),
        (["add", "x", "-e", "5s"], "unknown option '-e' for add"),
        (["add"], "missing job name"),
        (["add", "x", "y"], "unexpected argument 'y' (add takes one job name)"),
        (["add", "x", "every=5s"], "unexpected argument 'every=5s' (did you mean '--every=5s'?)"),
        (["add", "x", "--every"], "missing value for --every (--every DUR)"),
        (["exec", "x"], "unexpected argument 'x' (exec takes no arguments)"),
        (["exec", "--every", "5s"],
         "unknown option '--every' for exec (exec schedules with --start, --interval, --repeats and --async; or use 'timerctl add')"),
        (["cancel"], "missing job names (give at least one, or --tag TAG)"),
        (["resume", "a", "--now", "--after", "1s"], "give either --now or --after, not both"),
        (["resume", "a", "--now=yes"], "--now takes no value"),
        (["run", "a", "b"], "unexpected argument 'b' (run takes one job name)"),
        (["show"], "missing job name"),
        (["history"], "missing job name"),
        (["history", "a", "b"], "unexpected argument 'b' (history takes one job name)"),
        (["history", "a", "--limit"], "missing value for --limit (--limit N)"),
        (["history", "a", "--limt", "5"], "unknown option '--limt' for history (did you mean '--limit'?)"),
        (["history", "a", "limit=5"], "unexpected argument 'limit=5' (did you mean '--limit=5'?)"),
        (["history", "--tag", "web"], "unknown option '--tag' for history"),
        (["list", "x"], "unexpected argument 'x' (list takes no arguments)"),
        (["list", "--json=yes"], "--json takes no value"),
        (["ping", "--socket"], "missing value for --socket (--socket PATH)"),
        (["--socket=", "ping"], "--socket needs a path"),
        (["help", "bogus"], "unknown verb 'bogus'"),
        (["help", "add", "exec"], "unexpected argument 'exec'"),
        (["next"], "give a schedule: --cron EXPR, --calendar SPEC or --every DUR"),
        (["next", "--count", "3"], "give a schedule: --cron EXPR, --calendar SPEC or --every DUR"),
        (["next", "--cron", "* * * * *", "--calendar", "daily"], "give only one of --cron, --calendar and --every (got --cron --calendar)"),
        (["next", "--every", "1m", "--every", "2m"], "give only one of --cron, --calendar and --every (got --every --every)"),
        (["next", "--every", "1m", "--count", "1", "--count=2"], "give --count only once"),
        (["next", "--every", "1m", "--dst-gap", "skip"], "--dst-gap applies only to --cron and --calendar"),
        (["next", "--cron"], "missing value for --cron (--cron EXPR)"),
        (["next", "--cron", "* * * * *", "x"], "unexpected argument 'x' (next takes no arguments)"),
        (["next", "--cron", "* * * * *", "--", "x"], "unexpected argument 'x' (next takes no arguments)"),
        (["next", "--cron", "* * * * *", "--command", "true"], "unknown option '--command' for next"),
        (["next", "--crn", "* * * * *"], "unknown option '--crn' for next (did you mean '--cron'?)"),
        (["next", "cron=* * * * *"], "unexpected argument 'cron=* * * * *' (did you mean '--cron=* * * * *'?)"),
    ] as [([String], String)])
    func usageErrors(arguments: [String], message: String) {
        #expect(usageError(arguments)?.message == message)
    }

    @Test func usageErrorsExitTwoWithMessageAndHintOnStderr() {
        let result = runCLI(["add", "x", "--evry", "5s"])
        #expect(result.status == 2)
        #expect(result.stdout == "")
        #expect(result.sent.isEmpty)
        #expect(result.stderr == """
            timerctl: error: unknown option '--evry' for add (did you mean '--every'?)
            Usage: timerctl add NAME (--every DUR [--start DUR] | --in DUR | --at TIME | --cron EXPR | --calendar SPEC)
                                (--command STRING | --argv WORDS | --webhook URL | -- PROGRAM [ARG…]) [OPTIONS]
            See 'timerctl add --help'.

            """)
    }

    @Test func unknownVerbHintsAtTheGlobalHelp() {
        let result = runCLI(["lst"])
        #expect(result.status == 2)
        #expect(result.stderr == """
            timerctl: error: unknown verb 'lst' (did you mean 'list'?)
            Usage: timerctl [--socket PATH] [--json] VERB [ARG…]
            See 'timerctl --help' for the verbs.

            """)
    }

    @Test func noVerbPrintsTheGlobalHelpOnStderr() {
        let result = runCLI([])
        #expect(result.status == 2)
        #expect(result.stdout == "")
        #expect(result.stderr == "timerctl: error: missing verb\n\n" + HelpText.global())
    }
}

/// The `TimerdError` `body` throws, or nil.
private func caughtTimerdError(_ body: () throws(TimerdError) -> Void) -> TimerdError? {
    do {
        try body()
        return nil
    } catch {
        return error
    }
}

/// Every verb timerctl does not answer itself is sent as the protocol verb of its name.
@Suite struct WireVerbTests {
    @Test func everyVerbButTheLocalOnesHasItsWireVerb() {
        for verb in CLIVerb.allCases {
            if [.help, .next, .simulate, .import].contains(verb) {
                #expect(verb.wireVerb == nil, "\(verb)")
            } else {
                #expect(verb.wireVerb?.rawValue == verb.rawValue.uppercased(), "\(verb)")
            }
        }
    }
}
