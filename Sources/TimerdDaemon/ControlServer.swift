import Dispatch
import TimerdCore
import TimerdSystem

/// The control socket: accepts clients and owns their connections. Isolated to the control queue, which
/// its connections share (all socket I/O is non-blocking, so one queue serves every client).
actor ControlServer {
    nonisolated let executor = QueueExecutor(label: "timerd.control")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let path: String
    private let listener: FileDescriptor
    private let handler: ControlHandler
    private let log: Logger
    private var acceptSource: (any DispatchSourceRead)?
    private var connections: [Int: Connection] = [:]
    private var nextID = 1
    private var acceptPaused = false

    /// Binds `path` (replacing a stale socket, refusing a live one). Throws a `SocketError` to report.
    init(path: String, handler: ControlHandler, log: Logger) throws(SocketError) {
        self.path = path
        self.listener = try UnixSocket.listen(path: path, mode: 0o600)
        self.handler = handler
        self.log = log
    }

    func start() {
        let source = DispatchSource.makeReadSource(fileDescriptor: listener.rawValue, queue: executor.queue)
        source.setEventHandler { [self] in self.assumeIsolated { $0.acceptPending() } }
        let listener = self.listener
        source.setCancelHandler { try? listener.close() }
        source.activate()
        acceptSource = source
    }

    /// Stops accepting and removes the socket file; open connections stay until the daemon exits.
    func stopAccepting() {
        guard let acceptSource else { return }
        // A suspended source never runs its cancel handler (which closes the listener).
        if acceptPaused { acceptPaused = false; acceptSource.resume() }
        acceptSource.cancel()
        self.acceptSource = nil
        try? FileSystem.unlink(path)
    }

    /// Closes every open connection.
    func closeAll() {
        for connection in connections.values {
            connection.assumeIsolated { $0.close() }
        }
        connections.removeAll()
    }

    private func acceptPending() {
        while true {
            let fd: FileDescriptor?
            do {
                fd = try UnixSocket.accept(listener)
            } catch {
                // Out of descriptors (EMFILE/ENFILE) or memory: say so, and stop accepting briefly instead
                // of spinning on a listener that stays readable.
                log.warning("control socket: cannot accept a client: \(error); pausing accepts for 100ms")
                pauseAccepting()
                return
            }
            guard let fd else { return }
            let id = nextID
            nextID += 1
            let connection = Connection(
                id: id, fd: fd, executor: executor, handler: handler, log: log,
                onClose: { [self] id in self.assumeIsolated { $0.connections[id] = nil } })
            connections[id] = connection
            connection.assumeIsolated { $0.start() }
        }
    }

    private func pauseAccepting() {
        guard let acceptSource, !acceptPaused else { return }
        acceptSource.suspend()
        acceptPaused = true
        executor.queue.asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in
            self.assumeIsolated { $0.resumeAccepting() }
        }
    }

    private func resumeAccepting() {
        guard acceptPaused else { return }
        acceptPaused = false
        acceptSource?.resume()
    }
}
