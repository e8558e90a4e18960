import Dispatch
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// One client of the control socket: reads request lines, answers each with one reply line, in order.
///
/// Isolated to the control server's queue. Non-blocking I/O driven by the `IOWatcher`. Requests start one
/// after the other, each once the one before has taken effect or handed its change to the store: while
/// one waits for its commit, the next changes of named jobs are already on their way, and changes read in
/// one burst share a transaction (group commit within a connection). Any other request waits until the
/// ones before it are done, so a client reads its own writes. Replies go out in request order, each only
/// once its request is done; other connections go on meanwhile.
/// Reading pauses while too many requests or too many reply bytes are waiting (a client that writes but
/// never reads cannot make the daemon buffer without bound).
actor Connection {
    nonisolated let executor: QueueExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    nonisolated let id: Int
    /// Who connected (`SO_PEERCRED`).
    nonisolated let client: Client
    private let fd: FileDescriptor
    private let handler: ControlHandler
    private let log: Logger
    private let onClose: @Sendable (Int) -> Void

    private var framer = LineFramer(maxLineBytes: Limits.maxLineBytes)
    private var watch: IOWatcher.Registration?
    /// Lines read and not started, oldest first. A slice: a 64 KiB read holds some 1,600 pipelined
    /// `ADD`s, and taking each from the front of an array moved all the others (a memmove per request
    /// of up to 25 KB, 2,000 instructions an `ADD`).
    private var requests: ArraySlice<FramedLine> = []
    private var out = OutputBuffer()
    /// Requests started and not answered yet, and whether the last one started is still on its way in
    /// (not yet in effect or handed to the store: the next one waits for it).
    private var inFlight = 0
    private var starting = false
    /// Replies by request number, written in that order.
    private var nextNumber = 0
    private var nextToWrite = 0
    /// A nil reply: it was streamed (a `LIST`), already in `out`.
    private var finished: [Int: (reply: Reply?, watch: WatchFilter?)] = [:]
    /// A streamed reply waiting for the client to read what is queued (`writeStreamed`).
    private var streamWaiter: CheckedContinuation<Void, Never>?
    /// A WATCH was accepted: nothing more starts; the stream begins once its reply is written.
    private var watchAccepted = false
    private var pumping = false
    /// The first waiting request, parsed (it is parsed once, to see whether it may start yet).
    private var parsedNext: Result<Request, TimerdError>?
    private var flushScheduled = false
    private var readEOF = false
    private var closed = false
    /// After an accepted WATCH: events stream out, further input is ignored.
    private var streaming = false
    /// A dropped watcher: only the drop notice is still to be written, then the connection closes.
    private var dropping = false
    private let registry: Registry
    private let access: AccessControl
    /// A non-root client's requests per second (`max_request_rate`).
    private var requestBucket: TokenBucket
    private var refusedForRate = 0
    /// When the client last sent anything, for `idle_timeout` (monotonic ns).
    private var lastInput: MonoInstant
    private let clock: any Clock
    private var idleCheckPending = false

    private static let maxQueuedRequests = 64
    /// Requests in flight at once on one connection (those waiting for their commit, in practice).
    private static let maxInFlight = 256
    private static let maxQueuedReplyBytes = 1 << 20
    /// A watcher that lets this much pile up is too slow and is dropped (the daemon never waits for it).
    private static let maxWatchBacklogBytes = 256 << 10

    init(id: Int, fd: FileDescriptor, client: Client, executor: QueueExecutor, handler: ControlHandler, access: AccessControl,
         log: Logger, onClose: @escaping @Sendable (Int) -> Void) {
        self.registry = handler.registry
        self.id = id
        self.client = client
        self.access = access
        clock = handler.registry.clock
        let now = clock.monotonicNow
        let rate = access.settings.maxRequestRate
        self.requestBucket = TokenBucket(capacity: rate, perSecond: Double(rate), now: now)
        self.lastInput = now
        self.fd = fd
        self.executor = executor
        self.handler = handler
        self.log = log
        self.onClose = onClose
    }

    func start() {
        do {
            watch = try IOWatcher.shared.watch(fd, for: .readable, on: executor.queue) { [self] events in
                self.assumeIsolated { $0.ready(events) }
            }
        } catch {
            log.warning("control connection \(id): cannot watch the socket: \(error)")
            close()
        }
        scheduleIdleCheck()
    }

    // MARK: - Idle timeout

    /// Checks for idleness once `idle_timeout` after the last input; at most one check is pending.
    private func scheduleIdleCheck() {
        guard !idleCheckPending, !closed else { return }
        idleCheckPending = true
        let timeout = access.settings.idleTimeout
        let due = max(lastInput + timeout, clock.monotonicNow)
        executor.queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: due.nanosecondsSinceBoot)) { [self] in
            self.assumeIsolated { $0.idleCheck() }
        }
    }

    /// Closes the connection if it sent nothing for `idle_timeout`, has no request in progress, does not
    /// watch, and owns no `owner=connection` jobs (those live as long as their connection).
    private func idleCheck() {
        idleCheckPending = false
        guard !closed, !streaming, !dropping else { return }
        let timeout = access.settings.idleTimeout
        let idleFor = clock.monotonicNow - lastInput
        guard inFlight == 0, requests.isEmpty, idleFor >= timeout else { return scheduleIdleCheck() }
        let registry = self.registry
        let id = self.id
        Task {
            let owns = await registry.ownsJobs(connection: id)
            self.idleVerdict(ownsJobs: owns, timeout: timeout)
        }
    }

    private func idleVerdict(ownsJobs: Bool, timeout: Duration) {
        guard !closed else { return }
        let idleFor = clock.monotonicNow - lastInput
        guard !ownsJobs, inFlight == 0, requests.isEmpty, idleFor >= timeout, !streaming else {
            if ownsJobs { lastInput = clock.monotonicNow }  // check again a full timeout later
            return scheduleIdleCheck()
        }
        log.info("control connection \(id) (\(client.label)): closed after \(DurationText.format(timeout)) without a request (idle_timeout)")
        out += Array((Reply(TimerdError(.idleTimeout, "no request for \(DurationText.format(timeout)) (idle_timeout); closing")).encode() + "\n").utf8)
        flush()  // best effort: a client that does not read misses the notice
        close()
    }

    /// Closes the connection now.
    func close() {
        guard !closed else { return }
        closed = true
        if let watch { IOWatcher.shared.cancel(watch) }
        watch = nil
        try? fd.close()
        resumeStream()
        // A request still in flight may bind a job to this connection (owner=connection): the server hears
        // of the close once it is done (see `replied`), so the job cannot outlive the connection.
        if inFlight == 0 { onClose(id) }
    }

    private func ready(_ events: IOWatcher.Events) {
        if events.contains(.writable), !closed {
            flush()
            pump()  // room for replies again
        }
        // Not after a failed write closed the connection: its descriptor number may already belong to
        // another file (a blocking read there wedged the control queue and with it `stop`).
        if events.contains(.readable), !readEOF, !closed { read() }
        updateInterest()
        closeIfDone()
    }

    /// Waits for what the connection can use now: input while there is room for it, output while
    /// replies are pending.
    private func updateInterest() {
        guard let watch, !closed else { return }
        var interest: IOWatcher.Events = []
        let full = requests.count >= Self.maxQueuedRequests || out.count >= Self.maxQueuedReplyBytes
        if !readEOF, !full { interest.insert(.readable) }
        if !out.isEmpty { interest.insert(.writable) }
        IOWatcher.shared.update(watch, to: interest)
    }

    // MARK: - Reading

    private func read() {
        guard !closed else { return }
        let chunk: [UInt8]?
        do {
            chunk = try fd.tryRead(upToCount: 65_536)
        } catch {
            log.debug("control connection \(id): read failed: \(error)")
            return close()
        }
        guard let chunk else { return }
        if chunk.isEmpty {
            readEOF = true
            if let rest = framer.finish(), !rest.isEmpty {
                log.debug("control connection \(id): client left mid-line; \(rest.count) bytes dropped")
            }
            return
        }
        lastInput = clock.monotonicNow
        let lines = framer.append(chunk)
        if streaming || dropping { return }  // a watcher's input is ignored
        requests += lines
        pump()
    }

    // MARK: - Requests

    private func pump() {
        // A request answered at once (refused for its rate) is written from inside this loop.
        guard !pumping else { return }
        pumping = true
        defer { pumping = false }
        // While a full reply backlog waits for the client to read, start nothing more: the next request
        // could make another large reply.
        while !starting, !watchAccepted, !closed, !requests.isEmpty, inFlight < Self.maxInFlight,
              out.count < Self.maxQueuedReplyBytes {
            if parsedNext == nil, let first = requests.first { parsedNext = ControlHandler.parse(first) }
            guard Self.changesNamedJobs(parsedNext!) else {
                guard inFlight == 0 else { break }
                requests.removeFirst()
                let parsed = parsedNext!
                parsedNext = nil
                start(parsed)
                continue
            }
            // It and the changes of named jobs read after it go together (`ControlHandler.handleBatch`).
            var batch: [Result<Request, TimerdError>] = []
            while let next = parsedNext, Self.changesNamedJobs(next), inFlight + batch.count < Self.maxInFlight {
                batch.append(next)
                requests.removeFirst()
                parsedNext = requests.first.map(ControlHandler.parse)
            }
            start(batch: batch)
        }
    }

    /// Whether a request only changes the jobs it names (`ADD`, `EXEC`, and `CANCEL`, `PAUSE`, `RESUME`,
    /// `RUN` with names): it may start while earlier ones wait for their commit, since the registry makes
    /// requests naming the same job take effect in order. Anything else (a read, a `tag=` selection,
    /// `MODE`, a line in error…) starts once every earlier request is done, so it sees their effects.
    static func changesNamedJobs(_ parsed: Result<Request, TimerdError>) -> Bool {
        guard case .success(let request) = parsed else { return false }
        switch request.verb {
        case .add, .exec, .run: return true  // (`tag=` is one of the job's keys)
        case .cancel, .pause, .resume: return request.value("tag") == nil
        default: return false
        }
    }

    /// Starts a request that is not a change of named jobs (it has waited for every earlier one).
    private func start(_ parsed: Result<Request, TimerdError>) {
        guard let number = admit() else { return }
        let handler = self.handler
        let id = self.id
        let client = self.client
        starting = true
        if let list = Self.listed(parsed) {
            // LIST waits for every request before it (it is not pipelined), so all their replies are in
            // `out` already: its line is written there as it is made, the replies after it wait for it.
            Task {
                await handler.streamList(tag: list, client: client) { [self] bytes in await self.writeStreamed(bytes) }
                self.replied(number, nil)
            }
            return
        }
        Task {
            let (reply, watch) = await handler.handleWatching(parsed, connection: id, client: client)
            self.replied(number, reply, watch: watch)
        }
    }

    /// Starts changes of named jobs together: the next ones may start once these have handed their
    /// changes to the store.
    private func start(batch: [Result<Request, TimerdError>]) {
        var admitted: [(number: Int, parsed: Result<Request, TimerdError>)] = []
        for parsed in batch {
            if let number = admit() { admitted.append((number, parsed)) }
        }
        guard let last = admitted.last?.number else { return }
        starting = true
        let queue = executor.queue
        // Said by the registry once the changes are handed to the store (see `RequestProgress`).
        let handedOver: @Sendable () -> Void = { [self] in
            queue.async { self.assumeIsolated { $0.handedOver(last) } }
        }
        Task {
            // The operation uses `self`, so it is isolated to this connection like the task: a closure
            // that captured only the handler would be nonisolated, and `withValue`'s operation type (the
            // standard library's, not built with NonisolatedNonsendingByDefault) would run it on the
            // global concurrent executor.
            let replies = await RequestProgress.$handedOver.withValue(RequestProgress.HandOver(handedOver)) {
                await self.handler.handleBatch(admitted.map(\.parsed), connection: self.id, client: self.client)
            }
            for ((number, _), reply) in zip(admitted, replies) { self.replied(number, reply) }
        }
    }

    /// Numbers the next request, or answers it at once when the client exceeds its request rate.
    private func admit() -> Int? {
        let number = nextNumber
        nextNumber += 1
        inFlight += 1
        guard client.isAdmin || requestBucket.take(now: clock.monotonicNow) else {
            refusedForRate += 1
            let rate = access.settings.maxRequestRate
            // 1st, 10th, 100th, … refusal: a log line each, not one per request.
            if refusedForRate.isLogMilestone {
                log.warning("control connection \(id) (\(client.label)): more than \(rate) requests/s (max_request_rate); \(refusedForRate) refused so far")
            }
            replied(number, Reply(TimerdError(.rateLimited, "more than \(rate) requests per second on this connection (max_request_rate); slow down")))
            return nil
        }
        return number
    }

    /// A well-formed `LIST`: its tag (nil: every job). Its reply is streamed.
    private static func listed(_ parsed: Result<Request, TimerdError>) -> String?? {
        guard case .success(let request) = parsed, request.verb == .list,
              case .list(let tag)? = try? ControlCommand(request) else { return nil }
        return .some(tag)
    }

    /// Queues the next bytes of a streamed reply and writes what the socket takes; waits while more than
    /// `maxQueuedReplyBytes` are unsent (so a `LIST` of 100,000 jobs holds about that much, not 60 MB).
    /// False once the connection is closed: the rest is not wanted.
    private func writeStreamed(_ bytes: [UInt8]) async -> Bool {
        guard !closed else { return false }
        out += bytes
        flush()
        updateInterest()
        while !closed, out.count >= Self.maxQueuedReplyBytes {
            await withCheckedContinuation { streamWaiter = $0 }
        }
        return !closed
    }

    /// Lets a streamed reply go on once the client has read enough of it, or the connection closed.
    private func resumeStream() {
        guard closed || out.count < Self.maxQueuedReplyBytes, let waiter = streamWaiter else { return }
        streamWaiter = nil
        waiter.resume()
    }

    /// The request being started has handed its change to the store: the next one may start.
    private func handedOver(_ number: Int) {
        guard starting, number == nextNumber - 1 else { return }
        starting = false
        pump()
    }

    private func replied(_ number: Int, _ reply: Reply?, watch: WatchFilter? = nil) {
        inFlight -= 1
        if number == nextNumber - 1 { starting = false }
        if watch != nil { watchAccepted = true }
        guard !closed else {
            if inFlight == 0 { onClose(id) }
            return
        }
        finished[number] = (reply, watch)
        while let (reply, watch) = finished.removeValue(forKey: nextToWrite) {
            nextToWrite += 1
            if let reply { out.append(reply) }
            if let watch {
                flush()
                startStreaming(watch)
                break
            }
        }
        pump()
        // Written once the replies finished in this burst are all in `out`: one write for them all.
        guard !flushScheduled else { return }
        flushScheduled = true
        executor.queue.async { [self] in
            self.assumeIsolated { connection in
                connection.flushScheduled = false
                connection.flush()
                connection.pump()  // room for replies again
                connection.updateInterest()
                connection.closeIfDone()
            }
        }
    }

    // MARK: - WATCH

    private func startStreaming(_ filter: WatchFilter) {
        streaming = true
        requests.removeAll()
        parsedNext = nil
        let queue = executor.queue
        let registry = self.registry
        let id = self.id
        let client = self.client
        // Events wait here for the connection's queue, gathered as log lines are (`Gathering`).
        let waiting = Locked<(lines: [String], gathering: Gathering)>(([], Gathering()))
        Task {
            await registry.addWatcher(id, filter: filter, viewer: client) { [self] line in
                let time = waiting.withLock { state in
                    state.lines.append(line)
                    return state.gathering.arrived()
                }
                guard let time else { return }
                Gathering.schedule(at: time, on: queue) {
                    let lines = waiting.withLock { state in
                        state.gathering.taking()
                        defer { state.lines = [] }
                        return state.lines
                    }
                    self.assumeIsolated { $0.pushEvents(lines) }
                }
            }
            // Back on the connection's queue (the task is isolated to it): the connection may have closed
            // before the watcher was added, and the registry may have handled the close first. Remove it
            // again, so no watcher outlives its connection.
            if self.closed { await registry.removeWatcher(id) }
        }
    }

    private func pushEvents(_ lines: [String]) {
        guard streaming, !closed else { return }
        for line in lines {
            guard out.count < Self.maxWatchBacklogBytes else { return dropWatcher() }
            out += Array((line + "\n").utf8)
        }
        flush()
        updateInterest()
    }

    /// Ends a watch whose client reads too slowly: what it has not read is dropped, with a notice.
    private func dropWatcher() {
        log.warning("control connection \(id): watcher dropped: it read too slowly (\(out.count) bytes waiting)")
        // Keep the line being written (if any), drop the unsent backlog, and end with the notice.
        let keep = out.firstIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? out.count
        out.removeSubrange(keep...)
        out += Array((WatchEvent(
            at: RFC3339.format(clock.wallNow), event: "dropped",
            reason: "this watcher read too slowly; timerd does not wait for watchers").json + "\n").utf8)
        streaming = false
        dropping = true
        Task { await registry.removeWatcher(id) }
        flush()
        // Close once the notice is out, or after 10 s if the client never reads it.
        executor.queue.asyncAfter(deadline: .now() + .seconds(10)) { [self] in self.assumeIsolated { $0.close() } }
        updateInterest()
        closeIfDone()
    }

    private func closeIfDone() {
        if readEOF, inFlight == 0, requests.isEmpty, out.isEmpty { close() }
        if dropping, out.isEmpty { close() }
    }

    // MARK: - Writing

    private func flush() {
        defer { resumeStream() }
        while !out.isEmpty, !closed {
            let written: Int?
            do {
                written = try out.write(to: fd)
            } catch {
                log.debug("control connection \(id): write failed: \(error); closing")
                return close()
            }
            guard written != nil else { return }  // full: the watcher says when there is room
        }
    }
}

/// How a request tells its control connection that its change has been handed to the store (written
/// ahead, `docs/state.md`): the connection then starts its next request while this one waits for the
/// commit. A task-local value, set by the connection around the request's handling.
enum RequestProgress {
    @TaskLocal static var handedOver: HandOver = HandOver(nil)

    /// The callback, boxed (a task-local value of an optional function type crashed the release build
    /// in `swift_task_localValuePush`).
    final class HandOver: Sendable {
        let callback: (@Sendable () -> Void)?
        init(_ callback: (@Sendable () -> Void)?) { self.callback = callback }
    }
}
