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
        try eventually("finished") { try daemon.show("hook")["last_result"] != nil }
        let info = try daemon.show("hook")
        #expect(info["last_cpu_usage_ms"] is NSNull && info["last_memory_peak_bytes"] is NSNull)
    }
}
