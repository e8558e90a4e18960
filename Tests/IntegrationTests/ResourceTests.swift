import Foundation
import Testing

/// What a run uses (accounting) and what it may use (limits), through the release timerd.
@Suite struct ResourceTests {
    /// A shell that spins, forking nothing, until it has used `ticks` clock ticks (1/100 s on Linux) of CPU
    /// itself, as its own /proc/PID/stat counts them (utime + stime).
    static func busy(ticks: Int) -> String {
        "while :; do read -r line < /proc/$$/stat; set -- $line; [ $(( ${14} + ${15} )) -ge \(ticks) ] && break; done"
    }

    @Test func cpuTimeAndPeakMemoryOfARunAreAccounted() throws {
        let daemon = try Daemon(config: """
            [daemon]
            metrics_file = metrics.prom
            metrics_interval = 100ms
            """)
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH") == #"OK {"watching":"all"}"#)
        // 40 MB in a shell variable (and the command substitution's buffer), then 300 ms of CPU.
        let command = "x=$(head -c 40000000 /dev/zero | tr '\\0' a); " + Self.busy(ticks: 30)
        #expect(try daemon.request("ADD busy in=10ms command=\(Words.quote(command))") == "OK")
        var finished: [String: Any] = [:]
        while finished.isEmpty {
            let event = try WatchTests.event(try watcher.readLine())
            if event["job"] as? String == "busy", event["event"] as? String == "finished" { finished = event }
        }
        #expect(finished["result"] as? String == "ok")

        // At least the 300 ms the shell counted itself; no more than two cores' worth of its wall-clock time
        // (head and tr run side by side).
        let info = try daemon.show("busy")
        let cpu = try #require(info["last_cpu_usage_ms"] as? Double)
        let duration = try #require(info["last_duration_ms"] as? Double)
        #expect(cpu >= 300, "cpu \(cpu) ms")
        #expect(cpu <= 2 * duration, "cpu \(cpu) ms in \(duration) ms")
        #expect(finished["cpu_usage_ms"] as? Double == cpu)
        let peak = try #require(info["last_memory_peak_bytes"] as? Int)
        #expect(peak >= 40_000_000)
        #expect(finished["memory_peak_bytes"] as? Int == peak)
        #expect(info["last_io_read_bytes"] is Int && info["last_io_write_bytes"] is Int)

        // The history keeps it, and `timerctl show` and `history` say it.
        var runs: [[String: Any]] = []
        try eventually("the run in the history") {
            let reply = try daemon.request("HISTORY busy")
            runs = (try? JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8))) as? [[String: Any]] ?? []
            return !runs.isEmpty
        }
        #expect(runs.first?["cpu_usage_ms"] as? Double == cpu)
        #expect(runs.first?["memory_peak_bytes"] as? Int == peak)
        let shown = try daemon.ctl("show", "busy")
        let lines = shown.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines.contains { $0.hasPrefix("cpu:") } && lines.contains { $0.hasSuffix(" at peak") }, "\(shown.stdout)")
        let table = try daemon.ctl("history", "busy")
        #expect(table.stdout.hasPrefix("RUN") && table.stdout.contains("CPU") && table.stdout.contains("MEMORY"), "\(table.stdout)")

        // The metrics file adds it up per job.
        var text = ""
        eventually("metrics show busy's CPU time") {
            text = (try? String(contentsOfFile: daemon.directory + "/metrics.prom", encoding: .utf8)) ?? ""
            return text.contains(#"timerd_job_cpu_seconds_total{job="busy"} "#)
        }
        let line = text.split(separator: "\n").first { $0.hasPrefix(#"timerd_job_cpu_seconds_total{job="busy"} "#) }
        #expect(line.flatMap { Double($0.split(separator: " ").last!) }.map { abs($0 * 1000 - cpu) < 1 } == true, "\(line ?? "")")
        #expect(text.contains(#"timerd_job_last_memory_peak_bytes{job="busy"} \#(peak)"#))
    }

    /// Without the memory controller, a run's peak comes from `wait4`, which for a small program is timerd's
    /// own (the child shared timerd's memory until its execve): it is not given rather than given wrong.
    @Test func aSmallRunsPeakIsNotTimerdsOwn() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD small in=10ms command=true") == "OK")
        try eventually("finished") { try daemon.show("small")["last_result"] as? String == "ok" }
        let info = try daemon.show("small")
        #expect(info["last_memory_peak_bytes"] is NSNull, "\(info["last_memory_peak_bytes"] ?? "-")")
        #expect(info["last_cpu_usage_ms"] is Double)
    }

    @Test func aWebhookRunHasNoUsage() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD hook in=10ms webhook=http://127.0.0.1:9/none timeout=1s") == "OK")
        try eventually("finished") { try daemon.show("hook")["last_result"] as? String != nil }
        let info = try daemon.show("hook")
        #expect(info["last_cpu_usage_ms"] is NSNull && info["last_memory_peak_bytes"] is NSNull)
    }

    @Test func niceIoniceOomScoreAndLimitsAreWhatTheRunSees() throws {
        let daemon = try Daemon()
        let command = "echo nice=$(cut -d' ' -f19 /proc/self/stat) files=$(ulimit -Sn):$(ulimit -Hn) core=$(ulimit -c) "
            + "oom=$(cat /proc/self/oom_score_adj)"
        #expect(try daemon.request("ADD knobs in=10ms nice=7 ionice=idle oom_score_adj=321 limit_nofile=100:200 limit_core=0 "
                                   + "command=\(Words.quote(command))") == "OK")
        try eventually("finished") { try daemon.show("knobs")["last_result"] as? String == "ok" }
        let output = try #require(try daemon.show("knobs")["last_output"] as? String)
        #expect(output == "nice=7 files=100:200 core=0 oom=321\n", "\(output)")
        // The adjustment is the run's alone: a process that shares timerd's memory and makes one passes it on to
        // timerd too, unless timerd waited for it (CLONE_VFORK).
        let own = try String(contentsOfFile: "/proc/\(daemon.process.processIdentifier)/oom_score_adj", encoding: .utf8)
        #expect(own.trimmingCharacters(in: .whitespacesAndNewlines) != "321", "timerd's own oom_score_adj changed: \(own)")
        // The I/O class is the kernel's; ionice -p says it where util-linux is installed.
        let ionice = try Daemon.run("/bin/sh", ["-c", "command -v ionice"])
        if ionice.status == 0 {
            #expect(try daemon.request("ADD io in=10ms ionice=best-effort:6 command='ionice -p $$'") == "OK")
            try eventually("io finished") { try daemon.show("io")["last_result"] as? String == "ok" }
            #expect(try daemon.show("io")["last_output"] as? String == "best-effort: prio 6\n")
        }
        // The settings are kept with the job, as written.
        let options = try #require(try daemon.show("knobs")["options"] as? [String])
        #expect(options.contains("limit_nofile=100:200") && options.contains("ionice=idle") && options.contains("nice=7"))
    }

    @Test func aSettingTheKernelRefusesFailsTheRunAndSaysWhich() throws {
        let daemon = try Daemon()
        // A hard limit above what the kernel allows (limit_nofile above fs.nr_open, even for root) is refused by
        // setrlimit with EPERM, before anything of the program runs.
        #expect(try daemon.request("ADD toomany in=10ms limit_nofile=infinity command='echo ran'") == "OK")
        try eventually("finished") { try daemon.show("toomany")["last_result"] as? String != nil }
        let info = try daemon.show("toomany")
        #expect(info["last_result"] as? String == "failed")
        #expect((info["last_reason"] as? String)?.contains("cannot set limit_nofile: Operation not permitted (EPERM)") == true,
                "\(info["last_reason"] ?? "-")")
        #expect(info["last_output"] as? String == "")
    }

    @Test func cgroupLimitsAreRefusedWhereRunsCannotHaveThem() throws {
        // Outside a cgroup of its own (here: the test machine's), timerd has no cgroup for a run, so no limit to write.
        let daemon = try Daemon()
        guard try daemon.request("STATS").contains(#""by":"process-group""#) else { return }
        for (key, value) in [("memory_max", "64M"), ("cpu_quota", "50%"), ("io_weight", "50"), ("tasks_max", "10")] {
            let reply = try daemon.request("ADD l in=1h \(key)=\(value) command=true")
            #expect(reply.hasPrefix("ERR bad-argument \(key) needs a cgroup for each run, and runs have none here: "), "\(reply)")
        }
        let cli = try daemon.ctl("add", "l", "--in", "1h", "--memory-max", "64M", "--command", "true")
        #expect(cli.status != 0 && cli.stderr.contains("memory_max needs a cgroup for each run"), "\(cli.stderr)")
        #expect(try daemon.request("LIST").hasPrefix("OK []"))
    }

    @Test func aConfigJobWithALimitRunsCannotHaveStopsTheStart() throws {
        let daemon = try Daemon(config: """
            [job "capped"]
            every = 1h
            memory_max = 1G
            command = true
            """, waitForReady: false)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 1)
        #expect(daemon.logShows("\(daemon.configPath):1: memory_max needs a cgroup for each run"), "\(daemon.log)")
        #expect(daemon.logShows("the config is invalid; not starting"))
    }

    @Test func aUserCeilingRunsCannotHaveStopsTheStartAtItsLine() throws {
        let daemon = try Daemon(config: """
            [daemon]
            user_limit_nofile = 1024
            user_memory_max = 1G
            """, waitForReady: false)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 1)
        #expect(daemon.logShows("\(daemon.configPath):3: user_memory_max needs a cgroup for each run"), "\(daemon.log)")
    }
}

