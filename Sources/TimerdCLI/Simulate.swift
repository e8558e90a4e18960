import TimerdConfig
import TimerdCore
import TimerdEngine
import TimerdHost
import TimerdProtocol

/// `timerctl simulate`: a config's jobs through the scheduling engine in virtual time (`Simulation`),
/// printed decision by decision. Needs no daemon.
enum SimulateCommand {
    /// Reads the options, the config and its zones; runs; prints. Bad input is a message on stderr and
    /// status 1 (a bad value) or the config's `file:line:` diagnostics and status 1.
    static func run(_ options: [Option], json: Bool, context: Timerctl.Context) -> Int32 {
        let parsed: (path: String, options: Simulation.Options)
        do {
            parsed = try parse(options, now: context.now())
        } catch {
            context.stderr("timerctl: \(error.message)\n")
            return ExitStatus.daemonError
        }
        let configuration: Configuration
        switch HostConfig.load(path: parsed.path, explicit: true) {
        case .success(let loaded):
            configuration = loaded
        case .failure(let errors):
            context.stderr(errors.diagnostics.map { "\($0)\n" }.joined())
            return ExitStatus.daemonError
        }
        var jobs: [DeclaredJob] = []
        for job in configuration.jobs {
            do {
                jobs.append(DeclaredJob(spec: job.spec, file: job.file, line: job.line, civil: try HostConfig.civilSchedule(for: job.spec)))
            } catch {
                context.stderr("\(job.file):\(job.line): \(error.message)\n")
                return ExitStatus.daemonError
            }
        }
        var simulation = parsed.options
        simulation.maxRunning = configuration.settings.maxRunning
        simulation.pools = configuration.settings.pools
        simulation.machineID = HostConfig.machineID
        let names = Set(jobs.map(\.spec.name))
        if let unknown = simulation.runDurations.keys.sorted().first(where: { !names.contains($0) }) {
            context.stderr("timerctl: --run-duration: the config has no job named \(unknown)\n")
            return ExitStatus.daemonError
        }
        if let unknown = simulation.runResults.keys.sorted().first(where: { !names.contains($0) }) {
            context.stderr("timerctl: --run-result: the config has no job named \(unknown)\n")
            return ExitStatus.daemonError
        }
        // Written as it is decided, in blocks: a year of a per-minute job is over a million lines.
        final class Output {
            var text = ""
            /// The last instant formatted: a fire, its start and its end are often at the same one.
            var stamp = (WallTime(nanosecondsSinceEpoch: .min), "")
        }
        let output = Output()
        output.text.reserveCapacity(1 << 16)
        Simulation.run(jobs: jobs, options: simulation) { line in
            if output.stamp.0 != line.at { output.stamp = (line.at, RFC3339.format(line.at)) }
            if json {
                Self.appendJSON(line, at: output.stamp.1, to: &output.text)
            } else {
                Self.appendText(line, at: output.stamp.1, to: &output.text)
            }
            if output.text.utf8.count >= 1 << 16 {
                context.stdout(output.text)
                output.text.removeAll(keepingCapacity: true)
            }
        }
        context.stdout(output.text)
        return ExitStatus.success
    }

    /// `--from` (default now), `--until`, and the repeatable options, checked.
    static func parse(_ options: [Option], now: WallTime) throws(TimerdError) -> (path: String, options: Simulation.Options) {
        func time(_ text: String, _ flag: String) throws(TimerdError) -> WallTime {
            do {
                return try RFC3339.parse(text)
            } catch {
                throw TimerdError(.badArgument, "--\(flag): \(error.message)")
            }
        }
        var path = ""
        var from = RFC3339.truncatedToMicroseconds(now)
        var untilText: String?
        for option in options {
            switch option.key {
            case "config": path = option.value
            case "from": from = try time(option.value, "from")
            case "until": untilText = option.value
            default: break
            }
        }
        guard let untilText else { throw TimerdError(.missingArgument, "--until is required") }
        // `--until +30d`: a span after --from.
        let until: WallTime
        if untilText.hasPrefix("+") {
            do {
                until = from + (try DurationText.parse(String(untilText.dropFirst())))
            } catch {
                throw TimerdError(.badArgument, "--until: \(error.message)")
            }
        } else {
            until = try time(untilText, "until")
        }
        guard until > from else {
            throw TimerdError(.badArgument, "--until \(RFC3339.format(until)) is not after --from \(RFC3339.format(from))")
        }
        var result = Simulation.Options(from: from, until: until)
        for option in options {
            let value = option.value
            switch option.key {
            case "run_duration":
                guard let equals = value.firstIndex(of: "="), let name = try? JobName(String(value[..<equals])) else {
                    throw TimerdError(.badArgument, "--run-duration: expected JOB=DUR, got \"\(value)\"")
                }
                do {
                    result.runDurations[name] = try DurationText.parse(String(value[value.index(after: equals)...]))
                } catch {
                    throw TimerdError(.badArgument, "--run-duration \(name): \(error.message)")
                }
            case "down":
                let parts = value.split(separator: "..", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                guard parts.count == 2 else { throw TimerdError(.badArgument, "--down: expected FROM..TO, got \"\(value)\"") }
                let start = try time(parts[0], "down"), end = try time(parts[1], "down")
                guard start < end else { throw TimerdError(.badArgument, "--down: \(parts[1]) is not after \(parts[0])") }
                result.down.append(start...end)
            case "clock_step":
                // The offset may be negative: the last `=` splits (an RFC 3339 time has none).
                guard let equals = value.lastIndex(of: "=") else {
                    throw TimerdError(.badArgument, "--clock-step: expected AT=OFFSET, got \"\(value)\"")
                }
                let at = try time(String(value[..<equals]), "clock-step")
                var text = value[value.index(after: equals)...]
                let negative = text.first == "-"
                if text.first == "-" || text.first == "+" { text = text.dropFirst() }
                let offset: Duration
                do {
                    offset = try DurationText.parse(String(text))
                } catch {
                    throw TimerdError(.badArgument, "--clock-step: \(error.message)")
                }
                result.clockSteps.append((at, negative ? .zero - offset : offset))
            case "run_result":
                guard let equals = value.firstIndex(of: "="), let name = try? JobName(String(value[..<equals])),
                      let outcome = RunOutcome.Result(rawValue: String(value[value.index(after: equals)...])) else {
                    throw TimerdError(.badArgument, "--run-result: expected JOB=ok|failed|timeout|killed, got \"\(value)\"")
                }
                result.runResults[name] = outcome
            case "seed":
                guard let seed = UInt64(value) else { throw TimerdError(.badArgument, "--seed: expected a whole number, got \"\(value)\"") }
                result.seed = seed
            default:
                break
            }
        }
        return (path, result)
    }

    /// `TIME JOB EVENT [DETAIL] [(due TIME)] [REASON]`.
    static func text(_ line: Simulation.Line) -> String {
        var text = ""
        appendText(line, at: RFC3339.format(line.at), to: &text)
        return text
    }

    /// `at` is `line.at`, formatted.
    static func appendText(_ line: Simulation.Line, at: String, to text: inout String) {
        text += at
        text += " "
        text += line.job?.rawValue ?? "-"
        text += " "
        text += line.event
        if let detail = line.detail {
            text += " "
            text += detail
        }
        if let scheduled = line.scheduled, line.event != "fire", scheduled != line.at {
            text += " (due "
            text += RFC3339.format(scheduled)
            text += ")"
        }
        if let reason = line.reason {
            text += " "
            text += reason
        }
        text += "\n"
    }

    /// One JSON object: `at`, `job`, `event`, then `scheduled`, `run`, `reason`, `result` where they apply,
    /// and `count` on a `skip` or `miss` that stands for more than one fire (the text's `5 fires`).
    static func json(_ line: Simulation.Line) -> String {
        var text = ""
        appendJSON(line, at: RFC3339.format(line.at), to: &text)
        return text
    }

    static func appendJSON(_ line: Simulation.Line, at: String, to text: inout String) {
        // Keys in sorted order, as `Payload.encode` writes them; absent values are left out, but `job`
        // is null for the daemon's own events.
        var writer = JSONObjectWriter()
        writer.string("at", at)
        writer.integer("count", (line.event == "skip" || line.event == "miss") && line.count != 1 ? line.count : nil)
        writer.string("event", line.event)
        if let job = line.job { writer.string("job", job.rawValue) } else { writer.null("job") }
        writer.string("reason", line.reason)
        writer.string("result", line.result?.rawValue)
        writer.integer("run", line.run)
        writer.string("scheduled", line.scheduled.map { $0 == line.at ? at : RFC3339.format($0) })
        text += writer.finish()
        text += "\n"
    }
}
