//! `playdeck ask-mcp SOCKET`: the MCP server (stdio) claude starts for a
//! ToolSet with `ask`, with one tool, `ask`, its `--permission-prompt-tool`.
//! Each question goes to the attempt's socket, SOCKET, and the answer the
//! run gives comes back as claude wants it (`{"behavior": "allow", ...}`).
//! It decides nothing itself, and it reaches nothing but that socket.

use std::path::{Path, PathBuf};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{ServiceExt, schemars, tool, tool_router};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{CmdError, Outcome};

/// What claude passes its permission prompt tool.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AskRequest {
    /// The tool the agent wants to call.
    tool_name: String,
    /// The call's input.
    #[serde(default)]
    input: Value,
    /// claude's id of the call.
    #[serde(default)]
    #[allow(dead_code)]
    tool_use_id: Option<String>,
}

#[derive(Clone)]
struct Asker {
    socket: PathBuf,
}

#[tool_router(server_handler)]
impl Asker {
    #[tool(description = "Asks playdeck's operator whether the agent may make a tool call")]
    async fn ask(&self, Parameters(req): Parameters<AskRequest>) -> String {
        match forward(&self.socket, &req.tool_name, &req.input).await {
            Ok(answer) => answer,
            Err(e) => json!({
                "behavior": "deny",
                "message": format!("playdeck could not ask its operator: {e}"),
            })
            .to_string(),
        }
    }
}

/// One question on the attempt's socket, one answer back.
async fn forward(socket: &Path, tool: &str, input: &Value) -> std::io::Result<String> {
    let conn = tokio::net::UnixStream::connect(socket).await?;
    let (r, mut w) = conn.into_split();
    let mut q = json!({"tool_name": tool, "input": input}).to_string();
    q.push('\n');
    w.write_all(q.as_bytes()).await?;
    let mut line = String::new();
    BufReader::new(r).read_line(&mut line).await?;
    if line.trim().is_empty() {
        return Err(std::io::Error::other(
            "the run closed the question unanswered",
        ));
    }
    Ok(line.trim().to_string())
}

pub fn ask_mcp(socket: PathBuf) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CmdError::Failed(format!("ask-mcp: {e}")))?;
    rt.block_on(async move {
        let service = Asker { socket }
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CmdError::Failed(format!("ask-mcp: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| CmdError::Failed(format!("ask-mcp: {e}")))?;
        Ok(0)
    })
}
