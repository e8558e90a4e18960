import TimerdCore
import TimerdEngine
import TimerdProtocol

/// Requests read in one burst that each change only the jobs they name, handled together: their changes
/// go to the registry as one batch (`Registry.requests`), so they are checked in one turn of its queue,
/// written in one transaction and applied after one wait for it, instead of each crossing between the
/// connection's, the registry's and the store's threads on its own (`docs/architecture.md`, "A burst of
/// requests").
extension ControlHandler {
    /// Handles `parsed` (requests `Connection.changesNamedJobs` lets start while others wait) in order on
    /// connection `connection`: one reply each, in order, each as `handleWatching` would give it.
    func handleBatch(_ parsed: [Result<Request, TimerdError>], connection: Int, client: Client) async -> [Reply] {
        var replies: [Reply?] = Array(repeating: nil, count: parsed.count)
        var drafts: [(index: Int, draft: Draft)] = []
        var commands: [(index: Int, command: ControlCommand)] = []
        var allDrafted = true
        for (index, line) in parsed.enumerated() {
            requests.increment()
            do {
                let command = try ControlCommand(try line.get())
                let draft = try draft(command, client: client)
                commands.append((index, command))
                if let draft {
                    drafts.append((index, draft))
                } else {
                    allDrafted = false
                }
            } catch {
                replies[index] = Reply(error)
            }
        }
        if allDrafted {
            await handleDrafts(drafts, connection: connection, client: client, into: &replies)
        } else {
            // Some request needs more than the registry's request (an owner process to watch, etcd): all
            // are handled one after the other, and only the last lets the connection go on to its next.
            for (position, (index, command)) in commands.enumerated() {
                let last = position == commands.count - 1
                let handOver = last ? RequestProgress.handedOver : RequestProgress.HandOver(nil)
                replies[index] = await RequestProgress.$handedOver.withValue(handOver) {
                    await reply(to: command, connection: connection, client: client)
                }
            }
        }
        return replies.map { $0! }
    }

    private func reply(to command: ControlCommand, connection: Int, client: Client) async -> Reply {
        do throws(TimerdError) {
            return try await handle(command, connection: connection, client: client)
        } catch {
            return Reply(error)
        }
    }

    /// A request checked as far as it can be without the registry, or nil when it must be handled on its
    /// own (`handle`).
    private enum Draft {
        case add(JobSpec)
        /// Its name is given once every `EXEC` of the batch has been checked.
        case exec(JobSpec)
        case change(Input, names: [JobName])
        case run(JobName, RunParameters, force: Bool)
    }

    private func draft(_ command: ControlCommand, client: Client) throws(TimerdError) -> Draft? {
        guard cluster == nil else { return nil }
        switch command {
        case .add(let name, let options, let argv):
            let spec = try addSpec(name, options, argv, client: client)
            if case .process = spec.owner { return nil }
            return .add(spec)
        case .exec(let options, let argv):
            let spec = try execSpec(options, argv, client: client)
            if case .process = spec.owner { return nil }
            return .exec(spec)
        case .cancel(.names(let names)):
            // A CANCEL of many jobs takes effect in slices, as a request of its own (`Registry.request`).
            guard names.count <= Engine.cancelSlice else { return nil }
            return .change(.cancel(names, by: client.requester, checkOnly: false), names: names)
        case .pause(.names(let names)):
            return .change(.pause(names, by: client.requester, checkOnly: false), names: names)
        case .resume(.names(let names), let when):
            return .change(.resume(names, ResumeMode(when), by: client.requester, checkOnly: false), names: names)
        case .run(let name, let parameters, let force):
            return .run(name, parameters, force: force)
        default:
            return nil
        }
    }

    private func handleDrafts(_ drafts: [(index: Int, draft: Draft)], connection: Int, client: Client, into replies: inout [Reply?]) async {
        /// What the reply to a request of the batch says when it succeeds.
        enum Success {
            case ok
            case name(JobName)
            case status
        }
        let execs = drafts.count { if case .exec = $0.draft { true } else { false } }
        var names = execs == 0 ? [] : await registry.generateNames(execs)
        var batch: [NamedRequest] = []
        var sent: [(index: Int, success: Success)] = []
        for (index, draft) in drafts {
            do {
                switch draft {
                case .add(let spec):
                    batch.append(NamedRequest(.add(try Registry.addJob(spec, origin: .runtime, connection: connection, owner: client)), naming: [spec.name]))
                    sent.append((index, .ok))
                case .exec(var spec):
                    spec.name = names.removeFirst()
                    batch.append(NamedRequest(.add(try Registry.addJob(spec, origin: .runtime, connection: connection, owner: client)), naming: [spec.name]))
                    sent.append((index, .name(spec.name)))
                case .change(let input, let names):
                    batch.append(NamedRequest(input, naming: names))
                    sent.append((index, .ok))
                case .run(let name, let parameters, let force):
                    batch.append(NamedRequest(.runNow(name, by: client.requester, parameters: parameters, force: force), naming: [name]))
                    sent.append((index, .status))
                }
            } catch {
                replies[index] = Reply(error)
            }
        }
        for ((index, success), answer) in zip(sent, await registry.requests(batch)) {
            replies[index] = switch (answer, success) {
            case (.failure(let error), _): Reply(error)
            case (.success, .ok): .ok(nil)
            case (.success, .name(let name)): .ok(Payload.encode(["name": name.rawValue]))
            case (.success(.fire(let status)), .status): .ok(Payload.encode(["status": status]))
            case (.success, .status): .ok(Payload.encode(["status": "skipped"]))
            }
        }
    }
}

extension ResumeMode {
    init(_ when: ControlCommand.ResumeWhen) {
        self = switch when {
        case .onSchedule: .onSchedule
        case .now: .now
        case .after(let delay): .after(delay)
        }
    }
}
