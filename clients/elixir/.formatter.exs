[
  inputs: ["{mix,.formatter}.exs", "*.exs", "{lib,examples}/**/*.{ex,exs}"]
]
