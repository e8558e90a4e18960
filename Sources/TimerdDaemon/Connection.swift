import Dispatch
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// One client of the control socket: reads request lines, answers each with one reply line, in order.
///
/// Isolated to the control server's queue. Non-blocking I/O driven by the `IOWatcher`; requests are
/// handled one at a time per connection (so replies keep request order) while other connections go on.
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
    private var requests: [FramedLine] = []
    private var out = OutputBuffer()
    private var busy = false
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
        guard !busy, requests.isEmpty, idleFor >= timeout else { return scheduleIdleCheck() }
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
        guard !ownsJobs, !busy, requests.isEmpty, idleFor >= timeout, !streaming else {
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
        // A request still in flight may bind a job to this connection (owner=connection): the server hears
        // of the close once it is done (see `replied`), so the job cannot outlive the connection.
        if !busy { onClose(id) }
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
        // While a full reply backlog waits for the client to read, handle nothing more: the next request
        // could make another large reply.
        guard !busy, !closed, !requests.isEmpty, out.count < Self.maxQueuedReplyBytes else { return }
        busy = true
        let line = requests.removeFirst()
        if !client.isAdmin, !requestBucket.take(now: clock.monotonicNow) {
            refusedForRate += 1
            let rate = access.settings.maxRequestRate
            // 1st, 10th, 100th, … refusal: a log line each, not one per request.
            if refusedForRate.isLogMilestone {
                log.warning("control connection \(id) (\(client.label)): more than \(rate) requests/s (max_request_rate); \(refusedForRate) refused so far")
            }
            return replied(Reply(TimerdError(.rateLimited, "more than \(rate) requests per second on this connection (max_request_rate); slow down")))
        }
        let handler = self.handler
        let id = self.id
        let client = self.client
        Task {
            let (reply, watch) = await handler.handleWatching(line, connection: id, client: client)
            self.replied(reply, watch: watch)
        }
    }

    private func replied(_ reply: Reply, watch: WatchFilter? = nil) {
        busy = false
        guard !closed else { return onClose(id) }
        out.append(reply)
        flush()
        if let watch {
            startStreaming(watch)
        } else {
            pump()
        }
        updateInterest()
        closeIfDone()
    }

    // MARK: - WATCH

    private func startStreaming(_ filter: WatchFilter) {
        streaming = true
        requests.removeAll()
        let queue = executor.queue
        let registry = self.registry
        let id = self.id
        let client = self.client
        Task {
            await registry.addWatcher(id, filter: filter, viewer: client) { [self] line in
                queue.async { self.assumeIsolated { $0.pushEvent(line) } }
            }
            // Back on the connection's queue (the task is isolated to it): the connection may have closed
            // before the watcher was added, and the registry may have handled the close first. Remove it
            // again, so no watcher outlives its connection.
            if self.closed { await registry.removeWatcher(id) }
        }
    }

    private func pushEvent(_ line: String) {
        guard streaming, !closed else { return }
        guard out.count < Self.maxWatchBacklogBytes else {
            log.warning("control connection \(id): watcher dropped: it read too slowly (\(out.count) bytes waiting)")
            // Keep the line being written (if any), drop the unsent backlog, and end with the notice.
            let keep = out.firstIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? out.count
            out.removeSubrange(keep...)
            out += Array((Payload.encode(WatchEvent(
                at: RFC3339.format(clock.wallNow), event: "dropped",
                reason: "this watcher read too slowly; timerd does not wait for watchers")) + "\n").utf8)
            streaming = false
            dropping = true
            Task { await registry.removeWatcher(id) }
            flush()
            // Close once the notice is out, or after 10 s if the client never reads it.
            executor.queue.asyncAfter(deadline: .now() + .seconds(10)) { [self] in self.assumeIsolated { $0.close() } }
            updateInterest()
            return closeIfDone()
        }
        out += Array((line + "\n").utf8)
        flush()
        updateInterest()
    }

    private func closeIfDone() {
        if readEOF, !busy, requests.isEmpty, out.isEmpty { close() }
        if dropping, out.isEmpty { close() }
    }

    // MARK: - Writing

    private func flush() {
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
