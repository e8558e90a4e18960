import Foundation
import Glibc
import Testing
import TimerdSystem

/// What a run gets and how runs end: environment, output, exit results, timeouts, overlap, the run cap.
@Suite struct RunTests {
    @Test func environmentWorkingDirectoryAndStdin() throws {
        let daemon = try Daemon()
        let out = daemon.directory + "/env"
        let command = "env | grep -E '^(TIMERD_|GREETING|PATH=)' | sort > \(out); pwd >> \(out); cat >> \(out); echo stdin-done >> \(out)"
        #expect(try daemon.send(
            "ADD envjob in=10ms cwd=/tmp env=GREETING='hello world' meta=owner=ops meta=Ticket=T-1 command=\(Words.quote(command))"
        ) == ["OK"])
        eventually("ran") { daemon.lines("env").last == "stdin-done" }
        let lines = daemon.lines("env")
        #expect(lines.contains("GREETING=hello world"))
        #expect(lines.contains("TIMERD_JOB=envjob"))
        #expect(lines.contains("TIMERD_RUN=1"))
        #expect(lines.contains("TIMERD_META_OWNER=ops"))
        #expect(lines.contains("TIMERD_META_TICKET=T-1"))
        #expect(lines.contains { $0.hasPrefix("PATH=/usr/local/sbin:") })
        #expect(lines.contains("/tmp"), "cwd honoured")
        // stdin is /dev/null: `cat` ends at once, so nothing sits between pwd and the marker.
        #expect(lines[lines.count - 2] == "/tmp")
        let scheduled = try #require(lines.first { $0.hasPrefix("TIMERD_SCHEDULED_AT=") })
        let stamp = String(scheduled.dropFirst("TIMERD_SCHEDULED_AT=".count))
        #expect(stamp.count == "2026-11-29T16:00:00.000000Z".count && stamp.hasSuffix("Z"), "RFC 3339 UTC with microseconds: \(stamp)")
    }

    @Test func sigchldIsBlockedInTimerdAndNotInItsRuns() throws {
        let daemon = try Daemon()
        let pid = daemon.process.processIdentifier
        // A first run ends, so a SIGCHLD is pending in timerd (blocked everywhere, never taken) …
        #expect(try daemon.send("ADD first in=10ms command='echo first > \(daemon.directory)/first'") == ["OK"])
        eventually("first ran") { daemon.lines("first") == ["first"] }
        eventually("first ended") { (try? daemon.show("first")["running"] as? Int) == 0 }
        let mask = try #require(try String(contentsOfFile: "/proc/\(pid)/task/\(pid)/status", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("SigBlk:") })
        let blocked = try #require(UInt64(mask.split(separator: "\t").last ?? "", radix: 16))
        #expect(blocked & (1 << (UInt64(SIGCHLD) - 1)) != 0, "main thread: \(mask)")
        // … and the next run starts with no signal blocked and none pending: cp, started without a shell
        // (dash would clear the mask itself), copies its own status.
        let out = daemon.directory + "/signals"
        #expect(try daemon.send("ADD second in=10ms -- /bin/cp /proc/self/status \(out)") == ["OK"])
        eventually("second ran") { daemon.lines("signals").contains { $0.hasPrefix("SigBlk:") } }
        let fields = daemon.lines("signals").filter { $0.hasPrefix("SigBlk:") || $0.hasPrefix("SigPnd:") || $0.hasPrefix("ShdPnd:") }
        #expect(fields.sorted() == ["ShdPnd:\t0000000000000000", "SigBlk:\t0000000000000000", "SigPnd:\t0000000000000000"])
    }

    @Test(.enabled(if: kernelAtLeast(6, 12), "a slice of one's own is Linux 6.12's (EEVDF); earlier kernels report none"))
    func timerdsThreadsAskForAShortSliceAndItsRunsGetTheDefault() throws {
        let daemon = try Daemon()
        let pid = daemon.process.processIdentifier
        let out = daemon.directory + "/pid"
        let stop = daemon.directory + "/stop"
        #expect(try daemon.send("ADD slow in=10ms command='echo $$ > \(out); until [ -e \(stop) ]; do sleep 0.05; done'") == ["OK"])
        defer { _ = FileManager.default.createFile(atPath: stop, contents: nil) }
        eventually("started") { daemon.lines("pid").count == 1 }
        let run = try #require(Int32(daemon.lines("pid")[0]))
        // Every thread of timerd asks for 0.3 ms, the ones started after start-up too (inherited) …
        let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").compactMap { Int32($0) }
        #expect(threads.count > 2)
        for thread in threads { #expect(CurrentProcess.schedulingSlice(thread: thread) == 300_000, "thread \(thread)") }
        // … and the command it started the slice timerd itself was started with: this thread's, which it
        // inherited (the kernel's default, 1.4 ms on 2 CPUs, unless whoever runs the tests chose another).
        let own = try #require(CurrentProcess.schedulingSlice(thread: 0))
        #expect(own != 300_000)
        #expect(CurrentProcess.schedulingSlice(thread: run) == own)
    }

    @Test func argvRunsWithoutAShell() throws {
        let daemon = try Daemon()
        let out = daemon.directory + "/argv"
        // `$HOME` and `;` reach the program literally: no shell touches them.
        #expect(try daemon.request("ADD raw in=10ms -- /bin/sh -c 'printf \"%s|\" \"$@\" > \(out)' sh '$HOME' 'a;b'") == "OK")
        eventually("ran") { daemon.lines("argv") == ["$HOME|a;b|"] }
        #expect(try daemon.request("ADD missing in=10ms -- /no/such/program") == "OK")
        try eventually("failed") { try daemon.show("missing")["last_result"] as? String == "failed" }
        let info = try daemon.show("missing")
        #expect((info["last_reason"] as? String)?.contains("/no/such/program") == true)
        #expect((info["last_reason"] as? String)?.contains("No such file or directory") == true)
    }

    @Test func outputIsLoggedAndItsTailKept() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD talk in=10ms command='echo to-out; echo to-err >&2; exit 3'") == "OK")
        try eventually("finished") { try daemon.show("talk")["last_result"] as? String == "failed" }
        let info = try daemon.show("talk")
        #expect(info["last_exit_code"] as? Int == 3)
        #expect(info["last_output"] as? String == "to-out\nto-err\n")
        #expect(info["last_reason"] as? String == "exited with status 3")
        #expect(daemon.logShows("job=talk run=1 | to-out"))
        #expect(daemon.logShows("job=talk run=1 | to-err"))
        #expect(daemon.logShows("job=talk run=1 failed: exited with status 3"))
        // Only the last 4 KiB are kept.
        #expect(try daemon.request("ADD big in=10ms command='seq 1 5000'") == "OK")
        try eventually("finished") { try daemon.show("big")["last_result"] as? String == "ok" }
        let tail = try #require(try daemon.show("big")["last_output"] as? String)
        #expect(tail.utf8.count <= 4096 && tail.hasSuffix("4999\n5000\n"))
    }

    /// timerd keeps a copy of each run's output pipe open until the run ends (so the pipe never reports its
    /// end just before the exit does): a run that closes its output and goes on ends with its process and
    /// keeps what it wrote before, and once the runs are over, ended normally or unable to start, timerd
    /// holds none of their pipes.
    @Test func aRunEndsWithItsProcessAndLeavesNoPipeOpen() throws {
        let daemon = try Daemon()
        let pipesBefore = daemon.openPipes
        #expect(try daemon.request("ADD quiet in=10ms command='echo before; exec >/dev/null 2>&1; sleep 0.3; exit 4'") == "OK")
        #expect(try daemon.request("ADD missing in=10ms -- /no/such/program") == "OK")
        #expect(try daemon.request("ADD both in=10ms fail_on_stderr=yes command='echo out; echo err >&2'") == "OK")
        for name in ["quiet", "missing", "both"] {
            try eventually("\(name) finished") { try daemon.show(name)["last_result"] as? String == "failed" }
        }
        let quiet = try daemon.show("quiet")
        #expect(quiet["last_exit_code"] as? Int == 4)
        #expect(quiet["last_output"] as? String == "before\n")
        #expect(daemon.logShows("job=quiet run=1 failed: exited with status 4"))
        #expect(try daemon.show("both")["last_output"] as? String == "out\nerr\n")
        eventually("no run's pipe left open (before: \(pipesBefore))") { daemon.openPipes == pipesBefore }
    }

    @Test func timeoutKillsTheWholeProcessGroup() throws {
        let daemon = try Daemon()
        let pids = daemon.directory + "/pids"
        // The shell starts a grandchild that ignores nothing; both must die when the run times out.
        let command = "sleep 30 & echo $! > \(pids); echo $$ >> \(pids); wait"
        #expect(try daemon.request("ADD slow in=10ms timeout=300ms kill_grace=1s command=\(Words.quote(command))") == "OK")
        try eventually("timed out") { try daemon.show("slow")["last_result"] as? String == "timeout" }
        let info = try daemon.show("slow")
        #expect(info["last_signal"] as? Int == Int(SIGTERM))
        #expect((info["last_reason"] as? String)?.hasPrefix("timed out after 300ms") == true)
        let both = daemon.lines("pids").compactMap { Int32($0) }
        #expect(both.count == 2)
        eventually("shell and grandchild gone") { both.allSatisfy { !isRunning($0) } }
    }

    /// A run whose command leaves a process behind: a shell that notes a SIGTERM in `marks` and exits, and
    /// writes its pid to `pids` once its trap is set; the main shell waits for that, then for it (or
    /// exits with `exits`). Its output is not the run's: a shell whose `sleep` dies of a signal says so
    /// on stderr, and once the run has ended its output pipe is closed (SIGPIPE, not the SIGTERM tested).
    static func leaver(_ daemon: Daemon, exits: Bool = false) -> String {
        let marks = daemon.directory + "/marks", pids = daemon.directory + "/pids"
        return "sh -c \"trap 'echo got-term >> \(marks); exit 0' TERM; echo \\$\\$ > \(pids); while :; do sleep 0.05; done\" >/dev/null 2>&1 & "
            + "while [ ! -s \(pids) ]; do sleep 0.01; done; " + (exits ? "exit 0" : "wait")
    }

    /// The subshell `leaver` started, once its pid is written.
    static func leftBehind(_ daemon: Daemon) throws -> Int32 {
        eventually("pid written") { daemon.lines("pids").count == 1 }
        return try #require(daemon.lines("pids").first.flatMap { Int32($0) })
    }

    @Test func whatTheMainProcessLeavesIsStoppedWhenItExits() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD leaves in=10ms command=\(Words.quote(Self.leaver(daemon, exits: true)))") == "OK")
        let left = try Self.leftBehind(daemon)
        try eventually("finished") { try daemon.show("leaves")["last_result"] as? String == "ok" }
        eventually(timeout: 30, "the subshell stopped by SIGTERM") { daemon.lines("marks").contains("got-term") && !isRunning(left) }
        #expect(daemon.logShows("job=leaves run=1 its main process ended; sent SIGTERM to what it left in its process group"))
    }

    @Test func killModeProcessSignalsTheMainProcessOnlyAndLeavesTheRest() throws {
        let daemon = try Daemon()
        #expect(try daemon.request(
            "ADD main in=10ms timeout=200ms kill_grace=5s kill_mode=process command=\(Words.quote(Self.leaver(daemon)))") == "OK")
        let left = try Self.leftBehind(daemon)
        defer { kill(left, SIGKILL) }
        try eventually("timed out") { try daemon.show("main")["last_result"] as? String == "timeout" }
        #expect(try daemon.show("main")["last_signal"] as? Int == Int(SIGTERM))
        #expect(daemon.logShows("job=main run=1 timed out after 200ms; sending SIGTERM to its main process"))
        // A later run has started and ended meanwhile: timerd had its turns after the end of this one.
        #expect(try daemon.request("ADD later in=10ms command=true") == "OK")
        try eventually("later ran") { try daemon.show("later")["last_result"] as? String == "ok" }
        #expect(isRunning(left))
        #expect(daemon.lines("marks").isEmpty)
    }

    @Test func killModeMixedSendsSigtermToTheMainProcessAndSigkillToAll() throws {
        let daemon = try Daemon()
        #expect(try daemon.request(
            "ADD mixed in=10ms timeout=200ms kill_grace=300ms kill_mode=mixed command=\(Words.quote(Self.leaver(daemon)))") == "OK")
        let left = try Self.leftBehind(daemon)
        defer { kill(left, SIGKILL) }
        try eventually("timed out") { try daemon.show("mixed")["last_result"] as? String == "timeout" }
        #expect(daemon.logShows("job=mixed run=1 timed out after 200ms; sending SIGTERM to its main process"))
        // The main shell died of its SIGTERM; what it left got SIGKILL (no SIGTERM: nothing noted).
        eventually(timeout: 30, "the subshell killed") { !isRunning(left) }
        #expect(daemon.lines("marks").isEmpty)
    }

    @Test func killModeControlGroupSendsSigtermToAll() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD all in=10ms timeout=200ms command=\(Words.quote(Self.leaver(daemon)))") == "OK")
        let left = try Self.leftBehind(daemon)
        try eventually("timed out") { try daemon.show("all")["last_result"] as? String == "timeout" }
        eventually(timeout: 30, "the subshell stopped by SIGTERM") { daemon.lines("marks").contains("got-term") && !isRunning(left) }
        // One SIGTERM, with the main process's: when the main process's end stops what it left, a run being
        // stopped already had it (a second one means "now, without cleaning up" to many programs).
        #expect(daemon.lines("marks") == ["got-term"])
    }

    @Test func cancelStopsTheRunsInProgress() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD c in=10ms kill_grace=5s command=\(Words.quote(Self.leaver(daemon)))") == "OK")
        let left = try Self.leftBehind(daemon)
        #expect(try daemon.request("CANCEL c") == "OK")
        eventually(timeout: 30, "the subshell stopped by SIGTERM") { daemon.lines("marks").contains("got-term") && !isRunning(left) }
        #expect(daemon.logShows("job=c cancelled; stopping its 1 run in progress"))
        #expect(daemon.logShows("job=c run=1 stopping: cancelled; sending SIGTERM to its process group"))
        #expect(daemon.logShows("job=c run=1 run of a removed job ended: killed: cancelled; killed by SIGTERM"))
    }

    @Test func successExitCodesSayWhichStatusesSucceed() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD three in=10ms success_exit_codes=0,3 command='exit 3'") == "OK")
        #expect(try daemon.request("ADD four in=10ms success_exit_codes=0,3 command='exit 4'") == "OK")
        try eventually("both finished") {
            try ["three", "four"].allSatisfy { try daemon.show($0)["last_result"] as? String != nil }
        }
        #expect(try daemon.show("three")["last_result"] as? String == "ok")
        #expect(try daemon.show("three")["last_exit_code"] as? Int == 3)
        let four = try daemon.show("four")
        #expect(four["last_result"] as? String == "failed")
        #expect(four["last_reason"] as? String == "exited with status 4 (not one of success_exit_codes=0,3)")
    }

    @Test func failOnStderrFailsARunThatWritesThereAndKeepsBothStreams() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD noisy in=10ms fail_on_stderr=yes command='echo out; echo oops >&2; echo more'") == "OK")
        #expect(try daemon.request("ADD quiet in=10ms fail_on_stderr=yes command='echo out'") == "OK")
        #expect(try daemon.request("ADD tolerated in=10ms command='echo oops >&2'") == "OK")
        try eventually("all finished") {
            try ["noisy", "quiet", "tolerated"].allSatisfy { try daemon.show($0)["last_result"] as? String != nil }
        }
        let noisy = try daemon.show("noisy")
        #expect(noisy["last_result"] as? String == "failed")
        #expect(noisy["last_reason"] as? String == "exited with status 0 but wrote to stderr (fail_on_stderr): oops")
        // Both streams reach the output and the log.
        let output = noisy["last_output"] as? String ?? ""
        #expect(output.contains("out\n") && output.contains("oops\n") && output.contains("more\n"), "\(output)")
        #expect(daemon.logShows("job=noisy run=1 | oops"))
        #expect(try daemon.show("quiet")["last_result"] as? String == "ok")
        #expect(try daemon.show("tolerated")["last_result"] as? String == "ok")
    }

    @Test func timeoutEscalatesToSigkill() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD stubborn in=10ms timeout=100ms kill_grace=200ms command='trap \"\" TERM; sleep 30 & wait; sleep 30'") == "OK")
        try eventually("killed") { try daemon.show("stubborn")["last_result"] as? String == "timeout" }
        #expect(try daemon.show("stubborn")["last_signal"] as? Int == Int(SIGKILL))
        #expect(daemon.logShows("sending SIGKILL"))
    }

    @Test func overlapSkipSkipsAndSaysWhy() throws {
        let daemon = try Daemon()
        let gate = daemon.directory + "/gate"
        // Each run waits until the test creates the gate file, so the next fire finds it running.
        #expect(try daemon.request("ADD s every=30ms overlap=skip command='while [ ! -e \(gate) ]; do sleep 0.01; done; echo $TIMERD_RUN >> \(daemon.directory)/s'") == "OK")
        try eventually("skipped") { (try daemon.show("s")["skipped"] as? Int ?? 0) >= 2 }
        let info = try daemon.show("s")
        #expect(info["running"] as? Int == 1)
        #expect((info["last_skip"] as? [String: Any])?["reason"] as? String == "run 1 is still going (overlap=skip)")
        #expect(daemon.logShows("job=s fire skipped: run 1 is still going (overlap=skip)"))
        #expect(try daemon.request("RUN s").hasPrefix("ERR busy "))
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        eventually("first run ended") { daemon.lines("s").first == "1" }
        #expect(try daemon.request("CANCEL s") == "OK")
    }

    @Test func overlapQueueKeepsOnePendingFire() throws {
        let daemon = try Daemon()
        let gate = daemon.directory + "/gate"
        #expect(try daemon.request("ADD q every=30ms count=4 overlap=queue command='while [ ! -e \(gate) ]; do sleep 0.01; done; echo $TIMERD_RUN >> \(daemon.directory)/q'") == "OK")
        // Fires 2 and 3 come while run 1 waits: one is queued, the other skipped.
        try eventually("queued and skipped") {
            let info = try daemon.show("q")
            return info["pending"] as? Int == 1 && (info["skipped"] as? Int ?? 0) >= 1
        }
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        try eventually("finished") {
            let info = try daemon.show("q")
            return info["state"] as? String == "finished" && info["running"] as? Int == 0 && info["pending"] as? Int == 0
        }
        // Run 2 (the queued fire) started right after run 1.
        #expect(daemon.lines("q").prefix(2) == ["1", "2"])
        #expect(daemon.logShows("fire queued (overlap=queue)"))
    }

    @Test func overlapAllowRunsSideBySide() throws {
        let daemon = try Daemon()
        let gate = daemon.directory + "/gate"
        #expect(try daemon.request("ADD a every=30ms count=3 overlap=allow command='echo $TIMERD_RUN >> \(daemon.directory)/started; while [ ! -e \(gate) ]; do sleep 0.01; done'") == "OK")
        eventually("three at once") { daemon.lines("started").count == 3 }
        #expect(try daemon.show("a")["running"] as? Int == 3)
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        try eventually("all done") { try daemon.show("a")["running"] as? Int == 0 }
    }

    @Test func overlapReplaceStopsTheRunningOne() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD r every=200ms count=2 overlap=replace command='echo $TIMERD_RUN >> \(daemon.directory)/r; sleep 30'") == "OK")
        eventually("second run started") { daemon.lines("r") == ["1", "2"] }
        try eventually("first run killed") { try daemon.show("r")["last_result"] as? String == "killed" }
        let info = try daemon.show("r")
        #expect((info["last_reason"] as? String)?.hasPrefix("replaced by a new fire (overlap=replace)") == true)
        #expect(try daemon.request("CANCEL r") == "OK")
    }

    @Test func execAsyncNoQueuesRuns() throws {
        let daemon = try Daemon()
        let reply = try daemon.request("EXEC start=0 interval=30ms repeats=yes async=no command='sleep 0.1; echo $TIMERD_RUN >> \(daemon.directory)/e'")
        #expect(reply == #"OK {"name":"exec-1"}"#)
        eventually("runs one after another") { daemon.lines("e").count >= 2 }
        #expect(daemon.lines("e").prefix(2) == ["1", "2"])
        #expect(try daemon.request("CANCEL exec-1") == "OK")
    }

    @Test func maxRunningCapsConcurrentRuns() throws {
        let daemon = try Daemon(config: """
            [daemon]
            max_running = 2
            """)
        let gate = daemon.directory + "/gate"
        for name in ["c1", "c2", "c3"] {
            #expect(try daemon.request("ADD \(name) in=10ms command='echo $TIMERD_JOB >> \(daemon.directory)/started; while [ ! -e \(gate) ]; do sleep 0.01; done'") == "OK")
        }
        eventually("two started") { daemon.lines("started").count == 2 }
        let waiting = try ["c1", "c2", "c3"].filter { try daemon.show($0)["pending"] as? Int == 1 }
        #expect(waiting.count == 1, "one fire waits for a slot")
        #expect(daemon.logShows("fire waits for a run slot (max_running=2"))
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        eventually("third started after a slot freed") { daemon.lines("started").count == 3 }
        let late = try #require(try daemon.show(waiting[0])["last_lateness_ms"] as? Double)
        #expect(late > 0, "the wait is recorded as lateness")
    }

    @Test func sigtermGivesRunsAGracePeriodThenKillsThem() throws {
        let daemon = try Daemon(config: """
            [daemon]
            stop_grace = 300ms
            """)
        let pids = daemon.directory + "/pids"
        #expect(try daemon.request("ADD long in=10ms command='sleep 30 & echo $! > \(pids); wait'") == "OK")
        eventually("running") { daemon.lines("pids").count == 1 }
        let grandchild = try #require(Int32(daemon.lines("pids")[0]))
        #expect(daemon.stop() == 0)
        eventually("the run's process group was killed") { !isRunning(grandchild) }
        #expect(!FileManager.default.fileExists(atPath: daemon.socket), "socket removed")
        #expect(daemon.logShows("grace period over"))
        #expect(daemon.logShows("stopped"))
    }

    @Test func sigtermLetsQuickRunsFinish() throws {
        let daemon = try Daemon(config: """
            [daemon]
            stop_grace = 20s
            """)
        let gate = daemon.directory + "/gate"
        #expect(try daemon.request("ADD quick in=10ms command='while [ ! -e \(gate) ]; do sleep 0.01; done; echo done > \(daemon.directory)/quick'") == "OK")
        try eventually("running") { try daemon.show("quick")["running"] as? Int == 1 }
        kill(daemon.process.processIdentifier, SIGTERM)
        eventually("stopping") { daemon.log.contains("waiting up to 20s for 1 running job") }
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 0)
        #expect(daemon.lines("quick") == ["done"])
    }
}

/// True while `pid` exists and is not a zombie (an orphan killed with its group may wait a moment for
/// init to reap it).
func isRunning(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state != "Z" && state != "X"
}

/// Quoting for one protocol word (same rules as the protocol's `Words.quote`).
enum Words {
    static func quote(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: "'\"'\"'") + "'"
    }
}

/// Whether the running kernel's release is at least `major`.`minor`.
func kernelAtLeast(_ major: Int, _ minor: Int) -> Bool {
    var uts = utsname()
    uname(&uts)
    let release = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
    guard parts.count == 2 else { return false }
    return (parts[0], parts[1]) >= (major, minor)
}
