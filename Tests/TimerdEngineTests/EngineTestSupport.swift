import TimerdCore
import TimerdEngine

/// Builds specs, config jobs and instants for the engine's tests, and drives an engine by hand.
enum T {
    static func time(_ text: String) -> WallTime { try! RFC3339.parse(text) }

    static func name(_ text: String) -> JobName { try! JobName(text) }

    static func spec(_ name: String, _ options: [String: String]) -> JobSpec {
        var list = options.sorted { $0.key < $1.key }.map { KeyValue($0.key, $0.value) }
        if !options.keys.contains(where: { ["command", "argv", "webhook"].contains($0) }) { list.append(KeyValue("command", "true")) }
        return try! JobSpec(name: try! JobName(name), options: list)
    }

    /// Central European time with the EU's DST rules (no tz database needed).
    static let berlin = try! ZoneRules(posix: "CET-1CEST,M3.5.0,M10.5.0/3")

    static func civil(_ spec: JobSpec, zone: ZoneRules = .utc) -> CivilSchedule? {
        switch spec.schedule {
        case .cron(let expression) where !expression.isReboot:
            return CivilSchedule(pattern: .cron(expression), zone: zone, gap: spec.dstGap, repeat: spec.dstRepeat)
        case .calendar(let calendar):
            return CivilSchedule(pattern: .calendar(calendar), zone: zone, gap: spec.dstGap, repeat: spec.dstRepeat)
        default:
            return nil
        }
    }

    static func declared(_ name: String, _ options: [String: String], zone: ZoneRules = .utc) -> DeclaredJob {
        let spec = spec(name, options)
        return DeclaredJob(spec: spec, file: "test.conf", line: 1, civil: civil(spec, zone: zone))
    }

    static let root = Requester(uid: 0, isAdmin: true, label: "root")

    /// `simulate`'s lines as `EVENT JOB` words with their instants, for compact expectations.
    static func events(_ lines: [Simulation.Line], _ kinds: Set<String>? = nil) -> [String] {
        lines.filter { kinds?.contains($0.event) ?? true }.map { line in
            "\(RFC3339.format(line.at).prefix(19)) \(line.job?.rawValue ?? "-") \(line.event)"
        }
    }
}

/// An engine on a manual clock, with the effects of each step kept for inspection.
struct Driver {
    var engine: Engine
    let clock: ManualClock
    var effects: [Effect] = []
    /// What the store answers a request's records (`Effect.writeAhead`): saved, unless this is set.
    var saveFailure: TimerdError?

    init(settings: EngineSettings = EngineSettings(), at start: String = "2026-01-05T00:00:00Z") {
        engine = Engine(settings: settings)
        clock = ManualClock(wall: T.time(start))
    }

    @discardableResult
    mutating func handle(_ input: Input) -> [Effect] {
        effects = []
        var inputs = [input]
        while !inputs.isEmpty {
            let produced = engine.handle(inputs.removeFirst(), at: clock.now())
            effects += produced
            for effect in produced {
                switch effect {
                case .writeAhead(let change, _):
                    // A request's change is answered by the store at once: its effects follow the write.
                    inputs.append(saveFailure.map { .changeNotSaved(change, $0) } ?? .changeSaved(change))
                case .reply(.success(.partlyApplied(let change))):
                    // A change in slices: the next slice until the last.
                    inputs.append(.continueChange(change))
                default:
                    break
                }
            }
        }
        return effects
    }

    /// The records a request wrote ahead, and every record written behind, in order.
    var records: [Persist] {
        effects.flatMap { effect -> [Persist] in
            switch effect {
            case .writeAhead(_, let records): records
            case .persist(let record): [record]
            default: []
            }
        }
    }

    mutating func add(_ name: String, _ options: [String: String], owner: Requester = T.root, connection: Int? = nil) -> Result<Answer, TimerdError>? {
        let spec = T.spec(name, options)
        handle(.add(AddJob(spec: spec, origin: .runtime, owner: owner, civil: T.civil(spec), connection: connection)))
        return reply
    }

    /// The last answer (a change taking effect in slices answers once per slice).
    var reply: Result<Answer, TimerdError>? {
        for case .reply(let result) in effects.reversed() { return result }
        return nil
    }

    var armed: [(JobName, Deadline)] {
        effects.compactMap { if case .arm(let name, _, let deadline, _) = $0 { return (name, deadline) } else { return nil } }
    }

    var starts: [RunStart] {
        effects.compactMap { if case .startRun(let start) = $0 { return start } else { return nil } }
    }

    var decisions: [Decision] {
        effects.compactMap { if case .decision(let decision) = $0 { return decision } else { return nil } }
    }

    /// Moves the clock on and delivers the job's deadline.
    mutating func reach(_ name: String, after span: Duration) {
        clock.advance(by: span)
        let job = engine.job(T.name(name))!
        handle(.deadlineReached(job.spec.name, jobID: job.id))
    }

    mutating func finish(_ start: RunStart, _ result: RunOutcome.Result = .ok) {
        handle(.runFinished(start.job, jobID: start.jobID, run: start.run, RunOutcome(
            result: result, exitCode: result == .ok ? 0 : 1, reason: result == .ok ? "exited with status 0" : "exited with status 1",
            finishedWall: clock.wallNow, duration: .zero)))
    }
}
