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
    private let fd: FileDescriptor
    private let handler: ControlHandler
    private let log: Logger
    private let onClose: @Sendable (Int) -> Void

    private var framer = LineFramer(maxLineBytes: Limits.maxLineBytes)
    private var watch: IOWatcher.Registration?
    private var requests: [FramedLine] = []
    private var out: [UInt8] = []
    private var busy = false
    private var readEOF = false
    private var closed = false

    private static let maxQueuedRequests = 64
    private static let maxQueuedReplyBytes = 1 << 20

    init(id: Int, fd: FileDescriptor, executor: QueueExecutor, handler: ControlHandler, log: Logger,
         onClose: @escaping @Sendable (Int) -> Void) {
        self.id = id
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
    }

    /// Closes the connection now.
    func close() {
        guard !closed else { return }
        closed = true
        if let watch { IOWatcher.shared.cancel(watch) }
        watch = nil
        try? fd.close()
        onClose(id)
    }

    private func ready(_ events: IOWatcher.Events) {
        if events.contains(.writable) { flush() }
        if events.contains(.readable), !readEOF { read() }
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
        requests += framer.append(chunk)
        pump()
    }

    // MARK: - Requests

    private func pump() {
        guard !busy, !closed, !requests.isEmpty else { return }
        busy = true
        let line = requests.removeFirst()
        let handler = self.handler
        let id = self.id
        Task {
            let reply = await handler.handle(line, connection: id)
            self.replied(reply)
        }
    }

    private func replied(_ reply: Reply) {
        busy = false
        guard !closed else { return }
        out += Array((reply.encode() + "\n").utf8)
        flush()
        pump()
        updateInterest()
        closeIfDone()
    }

    private func closeIfDone() {
        if readEOF, !busy, requests.isEmpty, out.isEmpty { close() }
    }

    // MARK: - Writing

    private func flush() {
        while !out.isEmpty, !closed {
            let written: Int?
            do {
                written = try fd.tryWrite(out)
            } catch {
                log.debug("control connection \(id): write failed: \(error); closing")
                return close()
            }
            guard let written else { return }  // full: the watcher says when there is room
            out.removeFirst(written)
        }
    }
}
