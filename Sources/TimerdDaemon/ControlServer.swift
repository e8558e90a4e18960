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
    /// Told when a client's connection closes (its `owner=connection` jobs go with it).
    private let onConnectionClosed: @Sendable (Int) -> Void
    private var acceptWatch: IOWatcher.Registration?
    private var connections: [Int: Connection] = [:]
    private var nextID = 1

    /// Whether timerd created the socket file (and so removes it when it stops).
    private let ownsPath: Bool

    /// Binds `path` (replacing a stale socket, refusing a live one). Throws a `SocketError` to report.
    init(path: String, handler: ControlHandler, log: Logger, onConnectionClosed: @escaping @Sendable (Int) -> Void) throws(SocketError) {
        self.path = path
        self.listener = try UnixSocket.listen(path: path, mode: 0o600)
        self.ownsPath = true
        self.handler = handler
        self.log = log
        self.onConnectionClosed = onConnectionClosed
    }

    /// Serves on a listening socket someone else created (systemd's socket activation); its file is
    /// never removed by timerd.
    init(adopting listener: FileDescriptor, handler: ControlHandler, log: Logger, onConnectionClosed: @escaping @Sendable (Int) -> Void) {
        self.path = "socket passed by systemd (fd \(listener.rawValue))"
        self.listener = listener
        self.ownsPath = false
        self.handler = handler
        self.log = log
        self.onConnectionClosed = onConnectionClosed
    }

    func start() throws(Errno) {
        acceptWatch = try IOWatcher.shared.watch(listener, for: .readable, on: executor.queue) { [self] _ in
            self.assumeIsolated { $0.acceptPending() }
        }
    }

    /// Stops accepting and removes the socket file; open connections stay until the daemon exits.
    func stopAccepting() {
        guard let acceptWatch else { return }
        IOWatcher.shared.cancel(acceptWatch)
        self.acceptWatch = nil
        try? listener.close()
        if ownsPath { try? FileSystem.unlink(path) }
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
                onClose: { [self] id in
                    self.assumeIsolated { $0.connections[id] = nil }
                    self.onConnectionClosed(id)
                })
            connections[id] = connection
            connection.assumeIsolated { $0.start() }
        }
    }

    /// Stops accepting for 100 ms (the listener stays readable while descriptors are exhausted).
    private func pauseAccepting() {
        guard let acceptWatch else { return }
        IOWatcher.shared.update(acceptWatch, to: [])
        executor.queue.asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in
            self.assumeIsolated { server in
                if let watch = server.acceptWatch { IOWatcher.shared.update(watch, to: .readable) }
            }
        }
    }
}
