import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol

/// A time zone two hours east of UTC, so the tests do not depend on the machine's.
private func utcPlusTwo(_ seconds: Int64) -> String {
    let day = (seconds + 7_200) % 86_400
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(two(day / 3_600)):\(two(day % 3_600 / 60)):\(two(day % 60))"
}

@Suite("timerctl watch")
struct WatchCLITests {
    static let golden = """
        Usage: timerctl watch [NAME | --tag TAG] [--json]

        Follow what happens to jobs as it happens: fires, runs, skips, changes.

        Prints one line per event (fired, started, finished, skipped, added, cancelled, paused,
        resumed) of every job, of job NAME, or of the jobs tagged TAG, with its local time, until
        interrupted (Ctrl-C) or until timerd closes the watch (exit status 0, a note on stderr).

        Options:
          --tag TAG      Watch only the jobs tagged TAG.
          --json         Print each event as the JSON line timerd sends.
          --socket PATH  Talk to timerd on PATH (see 'timerctl --help').
          -h, --help     Show this help.

        """

    static let fired = #"{"at":"2026-11-29T18:30:56.401173Z","event":"fired","job":"hello","scheduled_at":"2026-11-29T18:30:56.400000Z"}"#
    static let finished =
        #"{"at":"2026-11-29T18:30:56.403173Z","event":"finished","exit_code":0,"job":"hello","reason":"exited with status 0","result":"ok","run":3}"#

    // MARK: Parser

    @Test func parsesAllOneJobOrOneTag() throws {
        #expect(try request(["watch"]) == Request(verb: .watch))
        #expect(try request(["watch", "hello"]) == Request(verb: .watch, positionals: ["hello"]))
        #expect(try request(["watch", "--tag", "db"]) == Request(verb: .watch, options: [Option(key: "tag", value: "db")]))
        #expect(try request(["watch", "--tag=db", "--json"]).encode() == "WATCH tag=db")
        #expect(try request(["watch", "--", "-x"]) == Request(verb: .watch, positionals: ["-x"]))
        #expect(try CommandParser.parse(["--json", "watch"]).output == .json)
    }

    @Test func rejectsMoreThanOneSelection() {
        #expect(usageError(["watch", "a", "b"])?.message == "unexpected argument 'b' (watch takes at most one job name, or --tag TAG)")
        #expect(usageError(["watch", "a", "--tag", "t"])?.message == "give a job name or --tag, not both")
        #expect(usageError(["watch", "--tag", "a", "--tag", "b"])?.message == "give --tag only once (watch takes one tag)")
        #expect(usageError(["watch", "--now"])?.message.hasPrefix("unknown option '--now' for watch") == true)
        #expect(usageError(["watch", "--tag"])?.message == "missing value for --tag (--tag TAG)")
    }

    @Test func help() {
        #expect(HelpText.verb(.watch) == Self.golden)
        #expect(runCLI(["help", "watch"]).stdout == Self.golden)
    }

    // MARK: Formatter

    @Test("one readable line per event kind", arguments: [
        (fired, "20:30:56.401 hello fired\n"),
        (#"{"at":"2026-11-29T18:30:56.403173Z","event":"started","job":"hello","run":3}"#, "20:30:56.403 hello #3 started\n"),
        (finished, "20:30:56.403 hello #3 finished ok (exited with status 0)\n"),
        (
            #"{"at":"2026-11-29T18:30:57.000000Z","event":"finished","exit_code":-1,"job":"hello","reason":"killed by SIGKILL after timeout","result":"timeout","run":4}"#,
            "20:30:57.000 hello #4 finished timeout (killed by SIGKILL after timeout)\n"
        ),
        (
            #"{"at":"2026-11-29T18:31:00.05Z","event":"skipped","job":"x","reason":"run 1 is still going (overlap=skip)"}"#,
            "20:31:00.050 x skipped: run 1 is still going (overlap=skip)\n"
        ),
        (#"{"at":"2026-11-29T23:59:59.999999Z","event":"added","job":"x"}"#, "01:59:59.999 x added\n"),
        (
            #"{"at":"2026-11-29T18:30:56Z","event":"cancelled","job":"x","reason":"owner process 123 exited"}"#,
            "20:30:56.000 x cancelled: owner process 123 exited\n"
        ),
        // The daemon's reasons that start with the event's word say it once.
        (#"{"at":"2026-11-29T18:30:56Z","event":"cancelled","job":"x","reason":"cancelled"}"#, "20:30:56.000 x cancelled\n"),
        (
            #"{"at":"2026-11-29T18:30:56Z","event":"cancelled","job":"x","reason":"cancelled: its owner process 123 exited"}"#,
            "20:30:56.000 x cancelled: its owner process 123 exited\n"
        ),
        (
            #"{"at":"2026-11-29T18:30:56Z","event":"cancelled","job":"x","reason":"cancelled; stopping its 1 run in progress"}"#,
            "20:30:56.000 x cancelled; stopping its 1 run in progress\n"
        ),
        (#"{"at":"2026-11-29T18:30:56Z","event":"cancelled","job":"x","reason":"cancelled in the cluster"}"#, "20:30:56.000 x cancelled in the cluster\n"),
        (
            #"{"at":"2026-11-29T18:30:56Z","event":"cancelled","job":"x","reason":"removed from the config"}"#,
            "20:30:56.000 x cancelled: removed from the config\n"
        ),
        (#"{"at":"2026-11-29T18:30:56.1Z","event":"paused","job":"x"}"#, "20:30:56.100 x paused\n"),
        (#"{"at":"2026-11-29T18:30:56.1Z","event":"resumed","job":"x"}"#, "20:30:56.100 x resumed\n"),
        (
            #"{"at":"2026-11-29T18:30:56.1Z","event":"dropped","reason":"the client read too slowly"}"#,
            "20:30:56.100 watch dropped: the client read too slowly\n"
        ),
        (#"{"at":"2026-11-29T18:30:56.1Z","event":"renamed","job":"x"}"#, "20:30:56.100 x renamed\n"),
        (#"{"at":"yesterday","event":"added","job":"x"}"#, "yesterday x added\n"),
        ("not json", "not json\n"),
    ])
    func eventLine(json: String, text: String) {
        #expect(WatchText.line(json, timeOfDay: utcPlusTwo) == text)
    }

    @Test func closedNote() {
        #expect(WatchText.closedNote(lastLine: nil) == "timerctl: timerd closed the watch\n")
        #expect(WatchText.closedNote(lastLine: Self.fired) == "timerctl: timerd closed the watch\n")
        #expect(
            WatchText.closedNote(lastLine: #"{"at":"2026-11-29T18:30:56Z","event":"dropped","reason":"too slow"}"#)
                == "timerctl: timerd dropped the watch: too slow\n")
    }

    // MARK: Running, with a fake transport

    /// Runs `watch` with a transport that replies `reply` then streams `events`.
    func runWatch(_ arguments: [String], reply: Reply, events: [String], writable: Int = .max) -> Transcript {
        let transcript = Transcript()
        var written = 0
        let context = Timerctl.Context(
            environment: [:], userID: 1000, now: { fixedNow },
            stdout: { transcript.stdout += $0 }, stderr: { transcript.stderr += $0 },
            send: { (_, _) throws(ClientError) in Issue.record("watch must stream"); return reply },
            stream: { (request, path, onLine) throws(ClientError) in
                transcript.sent.append((request, path))
                if case .err = reply { return reply }
                for event in events where !onLine(event) { break }
                return reply
            },
            writeLine: { line in
                guard written < writable else { return false }
                written += 1
                transcript.stdout += line
                return true
            })
        transcript.status = Timerctl.run(arguments: arguments, context: context)
        return transcript
    }

    @Test func jsonPrintsEventsVerbatim() {
        let result = runWatch(["watch", "hello", "--json"], reply: .ok(#"{"watching":"job:hello"}"#), events: [Self.fired, Self.finished])
        #expect(result.status == 0)
        #expect(result.stdout == Self.fired + "\n" + Self.finished + "\n")
        #expect(result.stderr == "timerctl: timerd closed the watch\n")
        #expect(result.sent.map(\.request) == [Request(verb: .watch, positionals: ["hello"])])
    }

    @Test func droppedReasonEndsTheWatch() {
        let dropped = #"{"at":"2026-11-29T18:30:56Z","event":"dropped","reason":"too slow"}"#
        let result = runWatch(["watch", "--json"], reply: .ok(#"{"watching":"all"}"#), events: [Self.fired, dropped])
        #expect(result.status == 0)
        #expect(result.stderr == "timerctl: timerd dropped the watch: too slow\n")
    }

    @Test func errReplyExitsOne() {
        let result = runWatch(["watch", "nope"], reply: .err(code: "no-such-job", message: "no job named nope"), events: [Self.fired])
        #expect(result.status == 1)
        #expect(result.stdout == "")
        #expect(result.stderr == "timerctl: no job named nope (no-such-job)\n")
    }

    @Test func closedStdoutStopsQuietly() {
        let result = runWatch(["watch", "--json"], reply: .ok(nil), events: [Self.fired, Self.finished, Self.fired], writable: 1)
        #expect(result.status == 0)
        #expect(result.stdout == Self.fired + "\n")
        #expect(result.stderr == "")
    }

    // MARK: Over a socket

    @Test func streamsEventsFromTheDaemonUntilItCloses() throws {
        let daemon = try FakeDaemon(reply: "OK {\"watching\":\"tag:db\"}\n" + Self.fired + "\n" + Self.finished + "\n")
        defer { daemon.stop() }
        let result = runCLIForReal(["--socket", daemon.path, "watch", "--tag", "db", "--json"])
        #expect(result.status == 0)
        #expect(result.stdout == Self.fired + "\n" + Self.finished + "\n")
        #expect(result.stderr == "timerctl: timerd closed the watch\n")
        #expect(daemon.requestLine() == "WATCH tag=db\n")
    }

    @Test func streamStopsWhenTheCallbackSaysSo() throws {
        let daemon = try FakeDaemon(reply: "OK\n" + Self.fired + "\n" + Self.finished)
        defer { daemon.stop() }
        var lines: [String] = []
        let reply = try DaemonClient.stream(Request(verb: .watch), to: daemon.path) { lines.append($0); return true }
        #expect(reply == .ok(nil))
        // The last line needs no newline.
        #expect(lines == [Self.fired, Self.finished])

        let again = try FakeDaemon(reply: "OK\n" + Self.fired + "\n" + Self.finished + "\n")
        defer { again.stop() }
        var first: [String] = []
        try DaemonClient.stream(Request(verb: .watch), to: again.path) { first.append($0); return false }
        #expect(first == [Self.fired])
    }

    @Test func streamErrAndFailures() throws {
        let refusing = try FakeDaemon(reply: "ERR bad-request no\n" + Self.fired + "\n")
        defer { refusing.stop() }
        var called = false
        let reply = try DaemonClient.stream(Request(verb: .watch), to: refusing.path) { _ in called = true; return true }
        #expect(reply == .err(code: "bad-request", message: "no"))
        #expect(!called)

        let silent = try FakeDaemon(reply: nil)
        defer { silent.stop() }
        let result = runCLIForReal(["--socket", silent.path, "watch"])
        #expect(result.status == 3)
        #expect(result.stderr == "timerctl: timerd on \(silent.path) closed the connection without replying (is it shutting down?)\n")

        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let missing = runCLIForReal(["--socket", directory.path + "/timerd.sock", "watch"])
        #expect(missing.status == 3)
        #expect(missing.stderr.hasPrefix("timerctl: cannot connect to "))
    }
}
