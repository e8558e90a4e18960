import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol

/// `--owner`/`--owner-pid`, `--tag`, `--modes` and the `mode` verb: parsing and output.
@Suite("owners, tags and modes")
struct OwnerTagModeCLITests {
    // MARK: Parsing: job flags

    @Test("new job flags map to their keys", arguments: [
        (["add", "cleanup", "--owner-pid", "4242", "--in", "10m", "--command", "rm -f /tmp/x"],
         "ADD cleanup owner=pid:4242 in=10m command='rm -f /tmp/x'"),
        (["add", "x", "--owner-pid=77", "--in", "1s", "--command", "true"], "ADD x owner=pid:77 in=1s command=true"),
        (["add", "x", "--owner", "pid:9", "--in", "1s", "--command", "true"], "ADD x owner=pid:9 in=1s command=true"),
        (["add", "x", "--tag", "web", "--tag=nightly", "--every", "1m", "--command", "true"],
         "ADD x tag=web tag=nightly every=1m command=true"),
        (["add", "x", "--modes", "default,maintenance", "--every", "1m", "--command", "true"],
         "ADD x modes=default,maintenance every=1m command=true"),
        (["exec", "--owner-pid", "4242", "--tag", "t", "--modes", "common", "--start", "5s", "--", "true"],
         "EXEC owner=pid:4242 tag=t modes=common start=5s -- true"),
    ])
    func jobFlags(arguments: [String], line: String) throws {
        #expect(try request(arguments).encode() == line)
    }

    @Test func ownerPIDIsPassedOnForTimerdToCheck() throws {
        #expect(try request(["add", "x", "--owner-pid", "abc"]).value("owner") == "pid:abc")
        #expect(try request(["add", "x", "--owner-pid="]).value("owner") == "pid:")
    }

    @Test("owner usage errors", arguments: [
        (["add", "x", "--owner-pid", "1", "--owner", "pid:2"], "give either --owner or --owner-pid, not both"),
        (["exec", "--owner=pid:2", "--owner-pid=1"], "give either --owner or --owner-pid, not both"),
        (["add", "x", "--owner", "connection", "--in", "1s", "--command", "true"],
         "--owner connection would cancel the job as soon as timerctl exits; use --owner-pid PID to tie it to a process"),
        (["add", "x", "--owner-pid"], "missing value for --owner-pid (--owner-pid PID)"),
        (["add", "x", "--owner-pd", "1"], "unknown option '--owner-pd' for add (did you mean '--owner-pid'?)"),
        (["add", "x", "--tags", "a"], "unknown option '--tags' for add (did you mean '--tag'?)"),
        (["add", "x", "--mode", "a"], "unknown option '--mode' for add (did you mean '--modes'?)"),
    ] as [([String], String)])
    func ownerErrors(arguments: [String], message: String) {
        let error = usageError(arguments)
        #expect(error?.message == message)
        #expect(error?.verb == CLIVerb(rawValue: arguments[0]))
    }

    @Test func ownerPIDIsListedRightAfterOwner() {
        for verb in [CLIVerb.add, .exec] {
            let names = verb.flags.map(\.name)
            let owner = names.firstIndex(of: "owner")
            #expect(owner.map { names[$0 + 1] } == "owner-pid", "\(verb)")
            #expect(names.contains("tag") && names.contains("modes"), "\(verb)")
        }
        #expect(Flag.ownerPID.synopsis == "--owner-pid PID")
    }

    // MARK: Parsing: --tag instead of names

    @Test("--tag instead of names", arguments: [
        (["pause", "--tag", "web"], "PAUSE tag=web"),
        (["cancel", "--tag=web"], "CANCEL tag=web"),
        (["resume", "--tag", "web"], "RESUME tag=web"),
        (["resume", "--tag", "web", "--now"], "RESUME now tag=web"),
        (["resume", "--now", "--tag", "web"], "RESUME now tag=web"),
        (["resume", "--tag", "web", "--after", "30s"], "RESUME tag=web after=30s"),
        (["list", "--tag", "web"], "LIST tag=web"),
        (["list", "--json", "--tag", "web"], "LIST tag=web"),
    ])
    func byTag(arguments: [String], line: String) throws {
        #expect(try request(arguments).encode() == line)
    }

    @Test func resumeNowByTagParsesBackWithNowAsTheOnlyWord() throws {
        let sent = try request(["resume", "--tag", "web", "--now"])
        #expect(try Request.parse(sent.encode()) == Request(verb: .resume, positionals: ["now"], options: [Option(key: "tag", value: "web")]))
    }

    @Test("--tag usage errors", arguments: [
        (["pause", "a", "--tag", "web"], "give job names or --tag, not both"),
        (["cancel", "--tag", "web", "--", "a"], "give job names or --tag, not both"),
        (["resume", "--tag", "a", "--tag", "b"], "give --tag only once (resume takes one tag)"),
        (["list", "--tag", "a", "--tag=b"], "give --tag only once (list takes one tag)"),
        (["list", "x", "--tag", "a"], "unexpected argument 'x' (list takes no arguments)"),
        (["pause"], "missing job names (give at least one, or --tag TAG)"),
        (["resume", "--now"], "missing job names (give at least one, or --tag TAG)"),
        (["pause", "--tag"], "missing value for --tag (--tag TAG)"),
        (["resume", "--tag", "t", "--now", "--after", "1s"], "give either --now or --after, not both"),
        (["run", "--tag", "t"], "unknown option '--tag' for run"),
        (["show", "--tag", "t"], "unknown option '--tag' for show"),
    ] as [([String], String)])
    func tagErrors(arguments: [String], message: String) {
        #expect(usageError(arguments)?.message == message)
    }

    @Test func onlyTheNameVerbsAndListSelectByTag() {
        #expect(CLIVerb.allCases.filter(\.selectsByTag) == [.cancel, .pause, .resume, .list, .watch])
        for verb in CLIVerb.allCases where verb.selectsByTag {
            #expect(verb.flags.contains { $0.name == "tag" && $0.key == "tag" }, "\(verb)")
            #expect(verb.hasJSONOutput, "\(verb)")
        }
    }

    // MARK: Parsing: mode

    @Test func modeTakesAtMostOneName() throws {
        #expect(try CommandParser.parse(["mode", "--json"]) == Command(verb: .mode, action: .send(.mode(nil)), output: .json))
        #expect(try request(["mode", "--", "-odd"]).encode() == "MODE -odd")
        #expect(usageError(["mode", "a", "b"])?.message == "unexpected argument 'b' (mode takes at most one mode name)")
        #expect(usageError(["mode", "--tag", "x"])?.message == "unknown option '--tag' for mode")
        #expect(usageError(["mod"])?.message == "unknown verb 'mod' (did you mean 'mode'?)")
        #expect(CLIVerb.mode.wireVerb == .mode)
    }

    // MARK: Output: --tag actions

    @Test("tag actions print the jobs, one per line", arguments: [
        ["pause", "--tag", "web"], ["resume", "--tag", "web", "--after", "1m"], ["cancel", "--tag", "web"],
    ])
    func tagActionPrintsJobs(arguments: [String]) {
        let result = runCLI(arguments, reply: .success(.ok(#"{"jobs":["api","static"]}"#)))
        #expect(result.status == 0)
        #expect(result.stdout == "api\nstatic\n")
        #expect(result.stderr == "")
        #expect(result.sent.first?.request.value("tag") == "web")
    }

    @Test func tagActionWithNoJobsSaysSoOnStderrAndSucceeds() {
        let result = runCLI(["cancel", "--tag", "web"], reply: .success(.ok(#"{"jobs":[]}"#)))
        #expect(result.status == 0)
        #expect(result.stdout == "")
        #expect(result.stderr == "timerctl: no jobs with tag web\n")
    }

    @Test func tagActionJSONIsTheReplyAsItCame() {
        for payload in [#"{"jobs":["api"]}"#, #"{"jobs":[]}"#] {
            let result = runCLI(["pause", "--tag", "web", "--json"], reply: .success(.ok(payload)))
            #expect(result.status == 0)
            #expect(result.stdout == payload + "\n")
            #expect(result.stderr == "")
        }
    }

    @Test func tagActionErrorsAreDaemonErrors() {
        let result = runCLI(["cancel", "--tag", "web"], reply: .success(.err(code: "cluster-unavailable", message: "etcd cannot be reached")))
        #expect(result.status == 1)
        #expect(result.stderr == "timerctl: etcd cannot be reached (cluster-unavailable)\n")
        // An invalid tag: timerd's error from timerd's decoder, printed the same way, without asking timerd.
        let invalid = runCLI(["cancel", "--tag", "a b"])
        #expect(invalid.status == 1)
        #expect(invalid.sent.isEmpty)
        #expect(invalid.stderr == #"timerctl: tag: invalid tag "a b": 1 to 64 letters, digits, '_', '.' or '-' (bad-argument)"# + "\n")
    }

    @Test func tagActionWithAnUnexpectedPayloadPrintsItRaw() {
        #expect(runCLI(["pause", "--tag", "web"], reply: .success(.ok(#"{"paused":2}"#))).stdout == #"{"paused":2}"# + "\n")
        #expect(runCLI(["pause", "--tag", "web"], reply: .success(.ok(nil))).stdout == "")
    }

    @Test func namedActionsStayQuietEvenWithAPayload() {
        #expect(runCLI(["pause", "a"], reply: .success(.ok(#"{"jobs":["a"]}"#))).stdout == "")
        #expect(runCLI(["pause", "a", "--json"], reply: .success(.ok(#"{"jobs":["a"]}"#))).stdout == #"{"jobs":["a"]}"# + "\n")
    }

    @Test func commandKnowsItsTaggedAction() throws {
        #expect(try CommandParser.parse(["pause", "--tag", "t"]).taggedAction == "t")
        #expect(try CommandParser.parse(["pause", "t"]).taggedAction == nil)
        #expect(try CommandParser.parse(["list", "--tag", "t"]).taggedAction == nil)
    }

    @Test func listByTagPrintsTheTable() {
        var job = JobInfo(name: "api", state: .scheduled, source: "runtime", schedule: "every 1m")
        job.tags = ["web"]
        let payload = Payload.encode([job])
        let result = runCLI(["list", "--tag", "web"], reply: .success(.ok(payload)))
        #expect(result.stdout == JobInfoText.table([job], now: fixedNow))
        #expect(runCLI(["list", "--tag", "web"], reply: .success(.ok("[]"))).stdout == "NAME  STATE  SCHEDULE  NEXT  LAST  RESULT\n")
    }

    // MARK: Output: held fires in list and show

    @Test func heldFireShowsInResultUnlessARunIsGoing() {
        var job = JobInfo(name: "a", state: .scheduled, source: "runtime", schedule: "every 1m")
        job.last_started = "2026-11-29T15:58:00.000000Z"
        job.last_finished = "2026-11-29T15:58:01.000000Z"
        job.last_result = .failed
        job.last_exit_code = 2
        #expect(JobInfoText.resultSummary(job) == "failed (2)")
        job.held_since = "2026-11-29T15:59:00.000000Z"
        #expect(JobInfoText.resultSummary(job) == "held")
        job.running = 1
        job.last_started = "2026-11-29T15:59:30.000000Z"
        #expect(JobInfoText.resultSummary(job) == "running")
    }

    @Test func listShowsHeldWithoutNewColumns() {
        var held = JobInfo(name: "cleanup", state: .scheduled, source: "runtime", schedule: "in 10m")
        held.held_since = "2026-11-29T15:57:00.000000Z"
        held.modes = ["maintenance"]
        #expect(JobInfoText.table([held], now: fixedNow) == """
            NAME     STATE      SCHEDULE  NEXT  LAST  RESULT
            cleanup  scheduled  in 10m    -     -     held

            """)
    }

    @Test func showPrintsOwnerTagsModesAndHeldSince() {
        var job = JobInfo(name: "cleanup", state: .scheduled, source: "runtime", schedule: "every 1m")
        job.options = ["every=1m", "command=rm -f /tmp/x", "timeout=5s", "owner=pid:4242", "tag=tmp", "tag=web", "modes=maintenance,common"]
        job.owner = "pid:4242"
        job.tags = ["tmp", "web"]
        job.modes = ["maintenance", "common"]
        job.next_fire = "2026-11-29T16:00:30.000000Z"
        job.held_since = "2026-11-29T15:57:00.000000Z"
        #expect(JobInfoText.detail(job, now: fixedNow) == """
            name:        cleanup
            state:       scheduled
            source:      runtime
            schedule:    every 1m
            command:     rm -f /tmp/x
            options:     timeout=5s
            owner:       pid:4242
            tags:        tmp, web
            modes:       maintenance, common
            next fire:   2026-11-29T16:00:30.000000Z (in 30s)
            held since:  2026-11-29T15:57:00.000000Z (3m ago)
            runs:        0
            running:     0
            pending:     0
            skipped:     0
            last run:    never

            """)
    }

    @Test func showOmitsUnsetOwnerTagsAndDefaultModes() {
        for modes in [[], ["default"]] as [[String]] {
            var job = JobInfo(name: "a", state: .scheduled, source: "runtime", schedule: "in 5s")
            job.options = ["in=5s", "command=true"]
            job.modes = modes
            let text = JobInfoText.detail(job, now: fixedNow)
            for label in ["owner:", "tags:", "modes:", "held since:", "options:"] {
                #expect(!text.contains(label), "\(label) with modes \(modes)")
            }
        }
        var connection = JobInfo(name: "a", state: .scheduled, source: "runtime", schedule: "in 5s")
        connection.owner = "connection"
        connection.modes = ["common"]
        let text = JobInfoText.detail(connection, now: fixedNow)
        #expect(text.contains("\nowner:       connection\n"))
        #expect(text.contains("\nmodes:       common\n"))
    }

    // MARK: Output: mode

    private static let held = [
        ModeInfo.Held(name: "backup", since: "2026-11-29T15:57:00.000000Z"),
        ModeInfo.Held(name: "report", since: "2026-11-29T15:59:58.000000Z"),
    ]

    @Test func modeQueryPrintsTheModeAndTheHeldJobs() {
        #expect(ReplyFormatter.modeText(ModeInfo(mode: "maintenance", held: Self.held), now: fixedNow) == """
            mode: maintenance
            held: backup (since 2026-11-29T15:57:00.000000Z, 3m ago)
            held: report (since 2026-11-29T15:59:58.000000Z, 2s ago)

            """)
        #expect(ReplyFormatter.modeText(ModeInfo(mode: "default", held: []), now: fixedNow) == "mode: default\nheld: none\n")
    }

    @Test func modeSwitchPrintsThePreviousModeAndTheReleasedJobs() {
        let info = ModeInfo(mode: "default", previous: "maintenance", held: [Self.held[1]], released: ["backup", "sync"])
        #expect(ReplyFormatter.modeText(info, now: fixedNow) == """
            mode: default (was maintenance)
            released: backup
            released: sync
            held: report (since 2026-11-29T15:59:58.000000Z, 2s ago)

            """)
        #expect(ReplyFormatter.modeText(ModeInfo(mode: "x", previous: "default", held: [], released: []), now: fixedNow)
            == "mode: x (was default)\n")
        #expect(ReplyFormatter.modeText(ModeInfo(mode: "x", previous: "x", held: []), now: fixedNow) == "mode: x (unchanged)\n")
    }

    @Test func modeHeldWithAnUnreadableTimeShowsItAsIs() {
        let info = ModeInfo(mode: "m", held: [ModeInfo.Held(name: "a", since: "a while")])
        #expect(ReplyFormatter.modeText(info, now: fixedNow) == "mode: m\nheld: a (since a while)\n")
    }

    @Test func modeThroughRun() {
        let payload = #"{"held":[{"name":"backup","since":"2026-11-29T15:57:00.000000Z"}],"mode":"default"}"#
        let result = runCLI(["mode"], reply: .success(.ok(payload)))
        #expect(result.status == 0)
        #expect(result.stdout == "mode: default\nheld: backup (since 2026-11-29T15:57:00.000000Z, 3m ago)\n")
        #expect(result.sent.map(\.request) == [Request(verb: .mode)])
        let switched = #"{"held":[],"mode":"maintenance","previous":"default","released":["a"]}"#
        let json = runCLI(["mode", "maintenance", "--json"], reply: .success(.ok(switched)))
        #expect(json.stdout == switched + "\n")
        #expect(json.sent.map(\.request) == [Request(verb: .mode, positionals: ["maintenance"])])
        #expect(runCLI(["mode", "maintenance"], reply: .success(.ok(switched))).stdout == "mode: maintenance (was default)\nreleased: a\n")
        #expect(runCLI(["mode"], reply: .success(.ok(#"{"mode":7}"#))).stdout == #"{"mode":7}"# + "\n")
    }
}
