import Foundation
import TimerdSystem

/// 1b. The floor of the lateness scenario: the same schedule (N jobs each due every second, phases spread
/// evenly) run by the bare C launcher (`bench/launcher.c`: clock_nanosleep, posix_spawn of the probe,
/// nothing else), in the same run and at the same load as timerd, so timerd's lateness can be given as
/// a ratio to what any launcher on this machine gets at that moment.
func runLauncher(_ setup: Setup, launcher: String, jobs: Int, seconds: Double) throws -> LatenessResult {
    let samplesPath = "\(setup.out)/launcher-\(jobs).samples"
    Measure.truncate(samplesPath)
    let output = try FileDescriptor.open("\(setup.out)/launcher-\(jobs).log", .writeOnly, options: [.create, .truncate])
    defer { try? output.close() }
    let child = try Spawn.run(
        program: launcher, arguments: [String(jobs), setup.probe, samplesPath],
        environment: ["PATH": "/usr/local/bin:/usr/bin:/bin"], output: output)
    let process = ProcessProbe(pid: child.pid)
    defer { child.killAndReap() }
    // As for timerd: every job has been started at least once before the window opens.
    Measure.sleep(seconds: 4)
    guard try child.waitExit() == nil else { throw BenchError("the launcher exited; see \(setup.out)/launcher-\(jobs).log") }
    Measure.truncate(samplesPath)
    let cpuBefore = try process.cpuSeconds()
    Measure.sleep(seconds: seconds)
    let cpu = try process.cpuSeconds() - cpuBefore
    let load = Measure.loadAverage()
    let command = Measure.probeSamples(samplesPath)
    let rss = try process.residentBytes() / 1024
    return LatenessResult(
        peer: "bare C launcher", jobs: jobs, seconds: seconds, expected_fires: Int(Double(jobs) * seconds), fired: command.count,
        starts: command.count, register_seconds: 0, dispatch_ms: nil, command_ms: Summary(milliseconds: command),
        rss_kb: rss, watcher_dropped: false, cpu_seconds: cpu, load_average: load)
}
