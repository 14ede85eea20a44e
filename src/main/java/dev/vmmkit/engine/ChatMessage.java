package dev.vmmkit.engine;

/** One message of a chat request: its role (one of {@link RequestFields#ROLES}) and its text. */
record ChatMessage(String role, String content) {
}
