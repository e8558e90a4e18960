import Foundation
import Testing
import TimerdTestSupport

/// `make bench` is not part of `make test` (its numbers need a quiet machine and minutes), but its driver
/// must keep working as the protocol changes: each scenario that needs no root, no nginx and no systemd,
/// tiny, against the timerd users get. (A WATCH of a tag before any job had it, an error since
/// docs/protocol.md said so, broke the lateness and scale scenarios unnoticed.)
@Suite("make bench's driver", .serialized)
struct BenchSmokeTests {
    @Test func everyScenarioRunsAndTheReportIsWritten() throws {
        let bench = try TestBinaries.executable("timerd-bench", in: TestBinaries.bundleDirectory, from: "the test bundle's directory")
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The probe the benchmarked commands run and the bare launcher (the floor), built as bench/run.sh
        // builds them (clang comes with Swift).
        for program in ["probe", "launcher"] {
            let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../bench/\(program).c").standardized.path
            let compiled = try Daemon.run("/usr/bin/env", ["clang", "-O2", "-o", directory + "/" + program, source])
            try #require(compiled.status == 0, "\(compiled.stderr)")
        }
        let out = directory + "/results"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let ran = try Daemon.run(bench, [
            "run", "--timerd", try Daemon.binary("timerd"), "--probe", directory + "/probe", "--launcher", directory + "/launcher", "--out", out,
            "--only", "lateness,scale,throughput,idle,cluster", "--loads", "20", "--seconds", "1", "--turns", "2", "--scale-jobs", "300",
            "--throughput-jobs", "20", "--throughput-seconds", "1", "--idle-seconds", "1", "--cluster-loads", "1:20", "--cluster-seconds", "1",
        ])
        #expect(ran.status == 0, "\(ran.stdout)\n\(ran.stderr)")
        let report = try Daemon.run(bench, ["report", "--out", out])
        #expect(report.status == 0, "\(report.stderr)")
        let text = (try? String(contentsOfFile: out + "/report.md", encoding: .utf8)) ?? ""
        for section in [
            "## Issue #24: cluster", "## Scale: 300 registered jobs", "## Lateness: 20 jobs",
            "| `timerctl --json list` of 300 jobs |", "| bare C launcher | 1 s |", "took turns, 2 windows each", "| Load | Stolen |",
            "| bare C launcher, again | 1 s |", "The launcher's second series is the floor against itself",
        ] {
            #expect(text.contains(section), "the report lacks \(section)")
        }
        // Each scheduler's samples are its windows' only (two of 0.5 s at 20 fires/s: about 20), not
        // the warm-ups around them (1.5 s at each `RESUME` and launcher start: 60 more lines).
        for scheduler in ["timerd", "launcher", "launcher2"] {
            let samples = (try? String(contentsOfFile: "\(out)/\(scheduler)-20.samples", encoding: .utf8)) ?? ""
            let count = samples.split(separator: "\n").count
            #expect((10...30).contains(count), "\(scheduler): \(count) samples for 20 fires due in its windows")
        }
    }
}
