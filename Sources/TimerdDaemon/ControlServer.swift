import Dispatch
import TimerdCore
import TimerdProtocol
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
    /// Told when a client's connection closes (its `owner=connection` jobs go with it), and whether it
    /// was the last one open.
    private let onConnectionClosed: @Sendable (_ id: Int, _ last: Bool) -> Void
    private var acceptWatch: IOWatcher.Registration?
    private var connections: [Int: Connection] = [:]
    /// Open connections per non-root user, for `max_connections_per_user`.
    private var connectionsPerUser: [UInt32: Int] = [:]
    private var refusedConnections = 0
    private var nextID = 1
    let access: AccessControl

    /// Whether timerd created the socket file (and so removes it when it stops).
    private let ownsPath: Bool

    /// Binds `path` (replacing a stale socket, refusing a live one). Throws a `SocketError` to report.
    init(path: String, handler: ControlHandler, access: AccessControl, log: Logger,
         onConnectionClosed: @escaping @Sendable (_ id: Int, _ last: Bool) -> Void) throws(SocketError) {
        self.path = path
        self.access = access
        self.listener = try UnixSocket.listen(path: path, mode: 0o600)
        self.ownsPath = true
        self.handler = handler
        self.log = log
        self.onConnectionClosed = onConnectionClosed
    }

    /// Serves on a listening socket someone else created (systemd's socket activation); its file is
    /// never removed by timerd.
    init(adopting listener: FileDescriptor, handler: ControlHandler, access: AccessControl, log: Logger,
         onConnectionClosed: @escaping @Sendable (_ id: Int, _ last: Bool) -> Void) {
        self.access = access
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
            let client: Client
            do {
                let credentials = try UnixSocket.peerCredentials(fd)
                client = Client(uid: credentials.uid, gid: credentials.gid, pid: credentials.pid)
            } catch {
                log.warning("control socket: cannot identify a client (SO_PEERCRED): \(error); closing it")
                try? fd.close()
                continue
            }
            let settings = access.settings
            if connections.count >= settings.maxConnections {
                refuse(fd, client, "timerd has \(connections.count) connections open (max_connections=\(settings.maxConnections)); try again later")
                continue
            }
            if !client.isAdmin, connectionsPerUser[client.uid, default: 0] >= settings.maxConnectionsPerUser {
                refuse(fd, client, "uid \(client.uid) has \(settings.maxConnectionsPerUser) connections open (max_connections_per_user); close some first")
                continue
            }
            let id = nextID
            nextID += 1
            if !client.isAdmin { connectionsPerUser[client.uid, default: 0] += 1 }
            let connection = Connection(
                id: id, fd: fd, client: client, executor: executor, handler: handler, access: access, log: log,
                onClose: { [self] id in
                    let last = self.assumeIsolated { server in
                        server.connections[id] = nil
                        if !client.isAdmin {
                            server.connectionsPerUser[client.uid, default: 1] -= 1
                            if server.connectionsPerUser[client.uid] == 0 { server.connectionsPerUser[client.uid] = nil }
                        }
                        return server.connections.isEmpty
                    }
                    self.onConnectionClosed(id, last)
                })
            connections[id] = connection
            connection.assumeIsolated { $0.start() }
        }
    }

    /// Gives the socket file its group and mode (`socket_group`): 0660 with that group, or with `timerd` when
    /// unset and that group exists; otherwise 0600 (root only). Applied to a socket systemd created too, so
    /// the config alone decides. Failures are logged and leave the socket at 0600.
    func applySocketAccess() {
        guard let file = UnixSocket.localPath(listener), FileSystem.isSocket(file) else {
            log.warning("control socket: cannot find its file to set its permissions; left as it is")
            return
        }
        let wanted = access.settings.socketGroup
        let group: GroupAccount?
        do {
            group = try GroupAccount.lookup(name: wanted ?? "timerd")
        } catch {
            log.warning("control socket: cannot look up group \(wanted ?? "timerd"): \(error); the socket stays root only")
            group = nil
        }
        do {
            guard let group else {
                if let wanted { log.warning("control socket: group \(wanted) does not exist; the socket stays root only") }
                try FileSystem.setPermissions(file, 0o600)
                log.info("control socket \(file): mode 0600 (root only: no socket_group, and no group timerd)")
                return
            }
            try FileSystem.setGroup(file, group.gid)
            try FileSystem.setPermissions(file, 0o660)
            log.info("control socket \(file): mode 0660, group \(group.name) (members may connect; see docs/security.md)")
        } catch {
            try? FileSystem.setPermissions(file, 0o600)
            log.warning("control socket \(file): cannot give it group \(group?.name ?? "?"): \(error); it stays mode 0600")
        }
    }

    /// Answers a connection over a limit with one `ERR too-many-connections` line (best effort: the socket
    /// buffer of a new connection has room for it) and closes it. Logged at the 1st, 10th, 100th, … refusal.
    private func refuse(_ fd: FileDescriptor, _ client: Client, _ message: String) {
        _ = try? fd.tryWrite(Array((Reply(TimerdError(.tooManyConnections, message)).encode() + "\n").utf8))
        try? fd.close()
        refusedConnections += 1
        if refusedConnections.isLogMilestone {
            log.warning("control socket: refused a connection from \(client.label): \(message) (\(refusedConnections) refused so far)")
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
