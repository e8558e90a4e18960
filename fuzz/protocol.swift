import TimerdCore
import TimerdProtocol

/// libFuzzer harness for the control protocol, parsing only (no daemon, no socket, no disk).
///
/// The first byte sets a small line cap (32–287 bytes) and a chunk size (1–8); the rest is the byte
/// stream a client sends. Asserts:
/// - `LineFramer` gives the same lines, `.tooLong`s and unterminated tail whether the stream arrives in
///   one piece or in chunks, and never a line longer than the cap;
/// - each framed line that `Request.parse(line:)` accepts encodes to one line that parses back to an
///   equal request; each one it rejects gives an `ERR` reply line that parses back with the same code;
/// - for ADD and EXEC, the `JobSpec` the daemon would build (as ControlHandler does) rebuilds from its
///   canonical `options` to an equal spec (what the state store relies on after a restart); for NEXT,
///   the query computes its fire times (UTC, or one of the zones loaded once at start) and the
///   reply payload round-trips through JSON;
/// - a line that parses as a reply re-encodes to a line that parses to the same encoding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProtocol(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzInput(data, size)
    guard let control = bytes.first else { return 0 }
    let cap = 32 + Int(control)
    let chunkSize = 1 + Int(control & 7)
    let stream = Array(bytes.dropFirst())

    var whole = LineFramer(maxLineBytes: cap)
    let events = whole.append(stream)
    let tail = whole.finish()
    var chunked = LineFramer(maxLineBytes: cap)
    var chunkedEvents: [FramedLine] = []
    for start in stride(from: 0, to: stream.count, by: chunkSize) {
        chunkedEvents += chunked.append(stream[start..<min(start + chunkSize, stream.count)])
        require(chunked.bufferedByteCount <= cap + 1, "the framer holds \(chunked.bufferedByteCount) bytes, cap \(cap)")
    }
    require(chunkedEvents == events && chunked.finish() == tail,
            "LineFramer(maxLineBytes: \(cap)) frames differently in chunks of \(chunkSize): \(events) vs \(chunkedEvents)")

    for event in events {
        guard case .line(let line) = event else { continue }
        require(line.count <= cap, "a framed line of \(line.count) bytes passed the cap of \(cap)")
        handle(line)
        checkReply(line)
    }
    return 0
}

private let now = WallTime(seconds: fuzzBaseSeconds)

/// What ControlHandler does with a line, up to the point where it would call the registry.
private func handle(_ line: [UInt8]) {
    let request: Request
    do {
        request = try Request.parse(line: line)
    } catch {
        let reply = Reply(error).encode()
        require(!reply.utf8.contains(where: { $0 == 10 || $0 == 13 }), "ERR reply \(reply.debugDescription) is not one line")
        let parsed = try? Reply.parse(reply)
        require(parsed?.errorCode == error.code && parsed?.encode() == reply,
                "ERR reply \(reply.debugDescription) parses to \(String(describing: parsed))")
        return
    }
    let encoded = request.encode()
    require(!encoded.utf8.contains(10), "request \(encoded.debugDescription) encodes to more than one line")
    let again = try? Request.parse(line: Array(encoded.utf8))
    require(again == request, "request \(request) encodes to \(encoded.debugDescription), which parses to \(String(describing: again))")

    let options = request.options.map { KeyValue($0.key, $0.value) }
    switch request.verb {
    case .add:
        guard request.positionals.count == 1, let name = try? JobName(request.positionals[0]),
              let spec = try? JobSpec(name: name, options: options, argv: request.argv) else { return }
        checkRebuilds(spec)
    case .exec:
        guard request.positionals.isEmpty,
              let spec = try? ExecRequest.spec(name: try! JobName("exec"), options: options, argv: request.argv) else { return }
        checkRebuilds(spec)
        checkPayload(["name": spec.name.rawValue])
    case .next:
        guard request.positionals.isEmpty, request.argv == nil, let query = try? NextFireQuery(options: options) else { return }
        let zone = query.timezone.map(FuzzZones.zone(named:)) ?? ZoneRules.utc
        guard let zone, let times = try? query.times(now: now, zone: zone) else { return }
        checkPayload(NextTimes(timezone: zone.name, times: times.map { RFC3339.format($0, in: zone) }))
    case .resume:
        for value in request.values("after") { _ = try? DurationText.parse(value) }
        fallthrough
    default:
        for word in request.positionals { _ = try? JobName(word) }
        for tag in request.values("tag") { _ = try? Mode.validName(tag, key: "tag", what: "tag") }
    }
}

private func checkPayload<T: Codable & Equatable>(_ value: T) {
    let payload = Payload.encode(value)
    let reply = Reply.ok(payload).encode()
    guard case .ok(let text?)? = try? Reply.parse(reply) else { return require(false, "OK reply \(reply) does not parse") }
    let decoded = try? Payload.decode(T.self, from: text)
    require(decoded == value, "payload \(payload) decodes to \(String(describing: decoded))")
}

/// The client's side: a line read as a reply re-encodes stably.
private func checkReply(_ line: [UInt8]) {
    guard let reply = try? Reply.parse(line: line) else { return }
    let encoded = reply.encode()
    let again = try? Reply.parse(encoded)
    require(again?.encode() == encoded, "reply \(reply) encodes to \(encoded.debugDescription), which parses to \(String(describing: again))")
}
