import Foundation
import TimerdSystem

// timerd-bench: the benchmark program behind `make bench` (bench/run.sh). Each scenario starts its own
// timerd (a release build) on a socket in the output directory and drives it over the control socket.

let usage = """
    usage: timerd-bench run --timerd PATH --probe PATH --out DIR [--launcher PATH] [--seconds S] [--loads N,N]
                            [--scale-jobs N] [--throughput-jobs N] [--throughput-seconds S]
                            [--webhook-jobs N] [--nginx PATH] [--idle-seconds S] [--only LIST]
           timerd-bench report --out DIR

    run      lateness (N jobs every second for S seconds, for each N in --loads, default 1000,200;
             S default 60; with --launcher, the bare C launcher of bench/launcher.c runs the same
             schedule after timerd at each load, as the floor), scale (--scale-jobs, default 100000), throughput (--throughput-jobs each
             due every second, default 3000, for 20 s) and idle (default 60 s); --only picks some of
             lateness,scale,throughput,webhooks,idle; webhooks (--webhook-jobs each due every
             second, default 8000, to a local nginx given by --nginx). Results go to DIR/*.json.
    report   DIR/report.md, CDF files and DIR/lateness.gp from the results (and peers' results) in DIR.
    dispatch-timers N, dispatch-idle [global]
             the bare Dispatch programs the scale and idle scenarios measure for comparison.

    """

var options: [String: String] = [:]
var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "dispatch-timers", let count = arguments.dropFirst().first.flatMap({ Int($0) }) { dispatchTimers(count) }
if arguments.first == "dispatch-idle" { dispatchIdle(global: arguments.dropFirst().first == "global") }
guard let mode = arguments.first, ["run", "report"].contains(mode) else {
    CurrentProcess.writeToStderr(usage)
    exit(2)
}
arguments.removeFirst()
while let flag = arguments.first, flag.hasPrefix("--"), arguments.count >= 2 {
    options[String(flag.dropFirst(2))] = arguments[1]
    arguments.removeFirst(2)
}
guard arguments.isEmpty, let out = options["out"] else {
    CurrentProcess.writeToStderr(usage)
    exit(2)
}

@MainActor func number(_ key: String, _ fallback: Double) -> Double {
    guard let text = options[key] else { return fallback }
    guard let value = Double(text), value > 0 else {
        CurrentProcess.writeToStderr("timerd-bench: --\(key) needs a positive number, got \(text)\n")
        exit(2)
    }
    return value
}

do {
    if mode == "report" {
        try Report(out: out).write()
        exit(0)
    }
    guard let timerd = options["timerd"], let probe = options["probe"] else {
        CurrentProcess.writeToStderr(usage)
        exit(2)
    }
    let setup = Setup(timerd: timerd, probe: probe, out: out, launcher: options["launcher"])
    let only = Set((options["only"] ?? "lateness,scale,throughput,webhooks,idle").split(separator: ",").map(String.init))
    let seconds = number("seconds", 60)
    if only.contains("lateness") {
        for load in (options["loads"] ?? "1000,200").split(separator: ",") {
            guard let jobs = Int(load), jobs > 0 else { throw BenchError("--loads: not a job count: \(load)") }
            print("lateness: \(jobs) jobs every second for \(Int(seconds)) s …")
            let result = try runLateness(setup, jobs: jobs, seconds: seconds)
            try Measure.writeJSON(result, to: "\(out)/timerd-\(jobs).json")
            if let launcher = setup.launcher {
                print("lateness: the bare C launcher, \(jobs) jobs every second for \(Int(seconds)) s …")
                try Measure.writeJSON(try runLauncher(setup, launcher: launcher, jobs: jobs, seconds: seconds), to: "\(out)/launcher-\(jobs).json")
            }
        }
    }
    if only.contains("scale") {
        let jobs = Int(number("scale-jobs", 100_000))
        print("scale: \(jobs) jobs …")
        try Measure.writeJSON(try runScale(setup, jobs: jobs), to: "\(out)/scale.json")
    }
    if only.contains("throughput") {
        print("throughput …")
        try Measure.writeJSON(try runThroughput(setup, jobs: Int(number("throughput-jobs", 3_000)), seconds: number("throughput-seconds", 20)), to: "\(out)/throughput.json")
    }
    if only.contains("webhooks") {
        guard let nginx = options["nginx"] else { throw BenchError("webhooks: give --nginx PATH (Debian's nginx-light)") }
        print("webhooks …")
        try Measure.writeJSON(try runWebhookThroughput(
            setup, nginx: nginx, jobs: Int(number("webhook-jobs", 8_000)), seconds: number("throughput-seconds", 20)),
            to: "\(out)/webhooks.json")
    }
    if only.contains("idle") {
        print("idle …")
        try Measure.writeJSON(try runIdle(setup, seconds: number("idle-seconds", 60)), to: "\(out)/idle.json")
    }
} catch {
    CurrentProcess.writeToStderr("timerd-bench: \(error)\n")
    exit(1)
}
