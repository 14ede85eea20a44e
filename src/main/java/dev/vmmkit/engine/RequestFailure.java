package dev.vmmkit.engine;

/**
 * A request the host cannot serve, with the HTTP status that says why: 400 malformed, 404 unknown,
 * 503 no device memory, 500 the engine failed.
 */
public final class RequestFailure extends RuntimeException {
    private final int status;

    private RequestFailure(int status, String message) {
        super(message);
        this.status = status;
    }

    public static RequestFailure badRequest(String message) {
        return new RequestFailure(400, message);
    }

    public static RequestFailure notFound(String message) {
        return new RequestFailure(404, message);
    }

    public static RequestFailure engineFailed(String message) {
        return new RequestFailure(500, message);
    }

    public static RequestFailure outOfMemory(String message) {
        return new RequestFailure(503, message);
    }

    public int status() {
        return status;
    }
}
