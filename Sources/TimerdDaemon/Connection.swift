import Dispatch
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// One client of the control socket: reads request lines, answers each with one reply line, in order.
///
/// Isolated to the control server's queue. Non-blocking I/O driven by Dispatch sources; requests are
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
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var openSources = 0
    private var requests: [FramedLine] = []
    private var out: [UInt8] = []
    private var busy = false
    private var readEOF = false
    private var readingPaused = false
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
        let source = DispatchSource.makeReadSource(fileDescriptor: fd.rawValue, queue: executor.queue)
        source.setEventHandler { [self] in self.assumeIsolated { $0.readable() } }
        source.setCancelHandler { [self] in self.assumeIsolated { $0.sourceCancelled() } }
        openSources += 1
        source.activate()
        readSource = source
    }

    /// Closes the connection now (daemon exit).
    func close() {
        guard !closed else { return }
        closed = true
        if readingPaused { readSource?.resume() }
        readSource?.cancel()
        readSource = nil
        writeSource?.cancel()
        writeSource = nil
        if openSources == 0 { try? fd.close() }
        onClose(id)
    }

    /// The descriptor is closed once the connection is closed and no source still uses it.
    private func sourceCancelled() {
        openSources -= 1
        if openSources == 0, closed { try? fd.close() }
    }

    // MARK: - Reading

    private func readable() {
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
            readSource?.cancel()
            readSource = nil
            return closeIfDone()
        }
        requests += framer.append(chunk)
        pump()
        pauseReadingIfFull()
    }

    private func pauseReadingIfFull() {
        let full = requests.count >= Self.maxQueuedRequests || out.count >= Self.maxQueuedReplyBytes
        if full, !readingPaused, let readSource {
            readSource.suspend()
            readingPaused = true
        } else if !full, readingPaused, let readSource {
            readSource.resume()
            readingPaused = false
        }
    }

    // MARK: - Requests

    private func pump() {
        guard !busy, !closed, !requests.isEmpty else { return }
        busy = true
        let line = requests.removeFirst()
        let handler = self.handler
        Task {
            let reply = await handler.handle(line)
            self.replied(reply)
        }
    }

    private func replied(_ reply: Reply) {
        busy = false
        guard !closed else { return }
        out += Array((reply.encode() + "\n").utf8)
        flush()
        pump()
        pauseReadingIfFull()
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
            guard let written else { return armWriteSource() }
            out.removeFirst(written)
        }
        writeSource?.cancel()
        writeSource = nil
    }

    private func armWriteSource() {
        guard writeSource == nil else { return }
        let source = DispatchSource.makeWriteSource(fileDescriptor: fd.rawValue, queue: executor.queue)
        source.setEventHandler { [self] in
            self.assumeIsolated { connection in
                connection.flush()
                connection.pauseReadingIfFull()
                connection.closeIfDone()
            }
        }
        source.setCancelHandler { [self] in self.assumeIsolated { $0.sourceCancelled() } }
        openSources += 1
        source.activate()
        writeSource = source
    }
}
