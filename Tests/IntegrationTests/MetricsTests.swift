import Foundation
import Testing

@Suite struct MetricsTests {
    @Test func theMetricsFileIsWrittenInPrometheusTextFormat() throws {
        // overlap = allow: each of good's fires starts a run, so there are exactly 3 + 1 fires below. With
        // the default (skip), a run of `true` slower than 20 ms (a loaded machine, make test-tsan) skipped
        // a fire, which still counts as one: "+Inf} 5" (9 seen under ThreadSanitizer).
        let daemon = try Daemon(config: """
            [daemon]
            metrics_file = metrics.prom
            metrics_interval = 100ms

            [job "good"]
            every = 20ms
            count = 3
            overlap = allow
            command = true

            [job "bad"]
            in = 10ms
            command = exit 4
            """)
        let path = daemon.directory + "/metrics.prom"
        var text = ""
        eventually("metrics show the runs") {
            text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return text.contains(#"timerd_job_runs_total{job="good",result="ok"} 3"#)
                && text.contains(#"timerd_job_runs_total{job="bad",result="failed"} 1"#)
        }
        #expect(text.contains("# TYPE timerd_job_runs_total counter"))
        #expect(text.contains(#"timerd_job_last_success_timestamp_seconds{job="good"} "#))
        #expect(!text.contains(#"timerd_job_last_success_timestamp_seconds{job="bad"}"#))
        #expect(text.contains(#"timerd_job_last_duration_seconds{job="bad"} "#))
        #expect(text.contains(#"timerd_jobs{state="finished"} 2"#))
        #expect(text.contains("# TYPE timerd_fire_lateness_seconds histogram"))
        #expect(text.contains(#"timerd_fire_lateness_seconds_bucket{le="+Inf"} 4"#))
        #expect(text.contains("timerd_fire_lateness_seconds_count 4"))
        // Every sample line is `name{labels} value` or `name value` with a number.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let value = line.split(separator: " ").last.map(String.init) ?? ""
            #expect(Double(value) != nil, "\(line)")
        }
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"), "written atomically through a rename")
    }

    @Test func badMetricsSettingsAreConfigErrors() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "[daemon]\nmetrics_file =\nmetrics_interval = 1ms\n".write(toFile: directory + "/t.conf", atomically: true, encoding: .utf8)
        let result = try Daemon.run(Daemon.binary("timerd"), ["--check-config", "--config", directory + "/t.conf"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("t.conf:2: metrics_file: empty path"))
        #expect(result.stderr.contains("t.conf:3: metrics_interval: must be at least 100ms"))
    }
}
