import Foundation
import TimerdSystem

/// 1b. The floor of the lateness scenario: the same schedule (N jobs each due every second, phases spread
/// evenly) run by the bare C launcher (`bench/launcher.c`: clock_nanosleep, posix_spawn of the probe,
/// nothing else), taking turns with timerd in the same run (`runLateness`), so timerd's lateness can be
/// given as a ratio to what any launcher on this machine gets at those moments. One window: a fresh
/// launcher, its warm-up, the window, then it is killed (its last probes finish on their own).
func launcherWindow(_ setup: Setup, launcher: String, jobs: Int, lines: ProbeLines, seconds: Double, turns: inout LatenessTurns) throws {
    let output = try FileDescriptor.open("\(setup.out)/launcher-\(jobs).log", .writeOnly, options: [.create, .append])
    defer { try? output.close() }
    let child = try Spawn.run(
        program: launcher, arguments: [String(jobs), setup.probe, lines.path],
        environment: ["PATH": "/usr/local/bin:/usr/bin:/bin"], output: output)
    defer { child.killAndReap() }
    Measure.sleep(seconds: LatenessTurns.warmUp)
    guard try child.waitExit() == nil else { throw BenchError("the launcher exited; see \(setup.out)/launcher-\(jobs).log") }
    try turns.measure(lines: lines, process: ProcessProbe(pid: child.pid), seconds: seconds)
}
