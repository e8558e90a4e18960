/// One event from ``LineFramer``.
public enum FramedLine: Sendable, Hashable {
    /// A complete line, without its `\n` and without one trailing `\r` (so `\r\n` endings work).
    case line([UInt8])
    /// The current line passed ``LineFramer/maxLineBytes``. Reported once per overlong line; the rest of
    /// that line (up to and including its `\n`) is discarded.
    case tooLong
}

/// Splits a byte stream into `\n`-terminated lines, chunk by chunk, with a memory bound.
///
/// Feed it whatever `read(2)` returned, in any chunk sizes: the events are the same however the stream
/// is split. The cap counts a line's bytes excluding its terminator (`\n` or `\r\n`). When a line grows
/// past the cap, `.tooLong` is emitted right away (without waiting for the `\n`), the bytes already
/// buffered are freed, and input is skipped up to the next `\n`; framing then resumes normally. The
/// framer never holds more than `maxLineBytes` bytes of line data, whatever the peer sends.
///
/// Cost is linear in the input size.
public struct LineFramer: Sendable {
    /// The default cap: 64 KiB per line.
    public static let defaultMaxLineBytes = 65536

    /// The longest accepted line, in bytes, not counting the `\n` or `\r\n` terminator.
    public let maxLineBytes: Int

    /// The current line's bytes so far (never more than `maxLineBytes`), without a trailing `\r`.
    private var buffer: [UInt8] = []
    /// The current line's last byte was a `\r` that is not in `buffer`: it is either the `\r` of a
    /// `\r\n` terminator or, if another byte follows, line data.
    private var pendingCR = false
    /// Skipping the rest of an overlong line.
    private var discarding = false

    /// Bytes of the current, unterminated line held right now (at most `maxLineBytes`, plus one for a
    /// held-back `\r`); 0 while skipping an overlong line.
    public var bufferedByteCount: Int { buffer.count + (pendingCR ? 1 : 0) }

    /// - Parameter maxLineBytes: the cap, `>= 0`; defaults to 65536.
    public init(maxLineBytes: Int = LineFramer.defaultMaxLineBytes) {
        precondition(maxLineBytes >= 0, "maxLineBytes must not be negative")
        self.maxLineBytes = maxLineBytes
    }

    /// Consumes `bytes` and returns the events they complete, in stream order.
    public mutating func append(_ bytes: some Sequence<UInt8>) -> [FramedLine] {
        var events: [FramedLine] = []
        let handled: Void? = bytes.withContiguousStorageIfAvailable { consume($0, into: &events) }
        if handled == nil {
            // Non-contiguous sequence: go through a bounded scratch buffer.
            var chunk: [UInt8] = []
            chunk.reserveCapacity(4096)
            for b in bytes {
                chunk.append(b)
                if chunk.count == 4096 {
                    chunk.withUnsafeBufferPointer { consume($0, into: &events) }
                    chunk.removeAll(keepingCapacity: true)
                }
            }
            chunk.withUnsafeBufferPointer { consume($0, into: &events) }
        }
        return events
    }

    /// Ends the stream. Returns the bytes of an unterminated last line (including a trailing `\r`, if
    /// any), or nil when the stream ended on a line boundary or inside an overlong line that was already
    /// reported as `.tooLong`. The framer is then back in its initial state.
    public mutating func finish() -> [UInt8]? {
        defer {
            buffer = []
            pendingCR = false
            discarding = false
        }
        if discarding || (buffer.isEmpty && !pendingCR) { return nil }
        return pendingCR ? buffer + [UInt8(ascii: "\r")] : buffer
    }

    /// The index of the first `\n` at or after `start`. A plain loop over the base address: in a debug build
    /// the generic `firstIndex(of:)` on a buffer slice costs about 150 ns a byte, and a client streaming
    /// megabytes (discarded as an overlong line) kept the control queue busy for seconds. Also how
    /// timerctl finds the end of a reply it passes on (`DaemonClient.relay`).
    public static func firstNewline(in input: UnsafeBufferPointer<UInt8>, from start: Int = 0) -> Int? {
        guard let base = input.baseAddress else { return nil }
        var index = start
        while index < input.count {
            if base[index] == UInt8(ascii: "\n") { return index }
            index += 1
        }
        return nil
    }

    private mutating func consume(_ input: UnsafeBufferPointer<UInt8>, into events: inout [FramedLine]) {
        var i = 0
        let n = input.count
        while i < n {
            let end = Self.firstNewline(in: input, from: i)
            if discarding {
                guard let end else { return }
                discarding = false
                i = end + 1
                continue
            }
            let segmentEnd = end ?? n
            addLineBytes(UnsafeBufferPointer(rebasing: input[i..<segmentEnd]), into: &events)
            guard let end else { return }
            i = end + 1
            if discarding {  // the overlong line ended at this very newline
                discarding = false
            } else {
                // The pending `\r`, if any, is the `\r` of a `\r\n` terminator: drop it.
                events.append(.line(buffer))
                buffer = []
                pendingCR = false
            }
        }
    }

    /// Appends a newline-free run of bytes to the current line, enforcing the cap.
    private mutating func addLineBytes(_ bytes: UnsafeBufferPointer<UInt8>, into events: inout [FramedLine]) {
        guard !bytes.isEmpty else { return }
        // A held-back `\r` followed by more bytes is line data; a new trailing `\r` is held back.
        let carriedCR = pendingCR ? 1 : 0
        let endsWithCR = bytes[bytes.count - 1] == UInt8(ascii: "\r")
        let body = endsWithCR ? UnsafeBufferPointer(rebasing: bytes.dropLast()) : bytes
        if buffer.count + carriedCR + body.count > maxLineBytes {
            events.append(.tooLong)
            buffer = []
            pendingCR = false
            discarding = true
            return
        }
        if carriedCR == 1 { buffer.append(UInt8(ascii: "\r")) }
        buffer.append(contentsOf: body)
        pendingCR = endsWithCR
    }
}
